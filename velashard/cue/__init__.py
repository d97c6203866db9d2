"""A CUE evaluator in pure Python, written from the CUE language specification and held to real CUE
by differential tests. It depends on nothing else in velashard.

    program = compile_sources({"a.cue": text})          # parse and resolve once; immutable, shareable
    value = program.evaluate({"parameter": {...}})      # unify with data; a fresh evaluation each call
    value.export("output")                              # plain data, or CueError naming path and cause
    plain(data)                                         # that data as JSON's (floats, not decimals)

compile_cached (a ProgramCache) compiles a text once per process and remembers a text that does not compile.
compile_package makes a CUE package importers see by its path; tokenize and parse_file give a text's tokens and
syntax tree (for tools that keep a file's layout); OPEN_LIST and LIST_TAIL mark open lists in `Instance.tags`.
"""

from velashard.cue.api import Instance, Program, compile_package, compile_sources, export_files, plain
from velashard.cue.errors import CueError, Pos
from velashard.cue.export import LIST_TAIL, OPEN_LIST
from velashard.cue.labels import is_regular, label_text
from velashard.cue.lexer import tokenize
from velashard.cue.parser import parse_file
from velashard.cue.programs import ProgramCache, compile_cached
from velashard.cue.values import SourcePackage

__all__ = ["CueError", "Instance", "LIST_TAIL", "OPEN_LIST", "Pos", "Program", "ProgramCache", "SourcePackage",
           "compile_cached", "compile_package", "compile_sources", "export_files", "is_regular", "label_text",
           "parse_file", "plain", "tokenize"]
