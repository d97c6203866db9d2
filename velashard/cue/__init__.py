"""A CUE evaluator in pure Python, written from the CUE language specification and held to real CUE
by differential tests. It depends on nothing else in velashard.

    program = compile_sources({"a.cue": text})          # parse and resolve once; immutable, shareable
    value = program.evaluate({"parameter": {...}})      # unify with data; a fresh evaluation each call
    value.export("output")                              # plain data, or CueError naming path and cause
    plain(data)                                         # that data as JSON's (floats, not decimals)

compile_cached (a ProgramCache) compiles a text once per process and remembers a text that does not compile.
"""

from velashard.cue.api import Instance, Program, compile_sources, export_files, plain
from velashard.cue.errors import CueError, Pos
from velashard.cue.labels import is_regular, label_text
from velashard.cue.programs import ProgramCache, compile_cached

__all__ = ["CueError", "Instance", "Pos", "Program", "ProgramCache", "compile_cached", "compile_sources",
           "export_files", "is_regular", "label_text", "plain"]
