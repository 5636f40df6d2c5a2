// The CPU time limit of the calls that have a deadline, watched from a thread of its own: the
// JavaScript thread cannot look at its clock while a handler keeps it busy. A call that is past
// its deadline and whose process CPU time since it started has reached the same limit (it
// spins: its deadline could not even fire) is answered "cpu_limit", and the process ends (Luma
// starts it again for the next call). Counting the process's CPU time counts this thread's and
// V8's helper threads' too; the deadline keeps that from ending a call early.
const { parentPort } = require("node:worker_threads");
const { writeSync } = require("node:fs");

const calls = new Map(); // id -> [process CPU time (µs), Date.now() ms] to stop at
let timer = null;

function used() {
  const usage = process.cpuUsage();
  return usage.user + usage.system;
}

function check() {
  const now = used();
  const clock = Date.now();
  for (const [id, [until, due]] of calls) {
    if (now >= until && clock >= due) {
      writeSync(1, JSON.stringify({ id, cpu_limit: true, restart: true }) + "\n");
      process.kill(process.pid, "SIGKILL");
    }
  }
}

parentPort.on("message", (message) => {
  if (message.start !== undefined) {
    calls.set(message.start, [message.from + message.limit * 1000,
                              Date.now() + message.limit]);
    if (timer === null) timer = setInterval(check, 10);
  } else {
    calls.delete(message.stop);
    if (calls.size === 0 && timer !== null) {
      clearInterval(timer);
      timer = null;
    }
  }
});
