// Stops this process, as SIGTERM would (a graceful drain), when the process that started it
// goes away. Loaded by bin/svc.mjs into `svc start|gateway|worker` run through npx or npm (whose
// `sh -c` between npm and svc dies on SIGTERM without passing it on), and by `svc start` into
// the dashboard it runs (`node --require`), so that no process is left running whichever one
// of the chain is stopped. Watches only when SVC_PARENT_PID names the parent, read as early as
// possible: a parent that died before this ran would not be noticed otherwise.
// Plain CommonJS: the dashboard's node loads it before Next, without the CLI's bundle.
'use strict';

const parent = Number(process.env.SVC_PARENT_PID);
delete process.env.SVC_PARENT_PID; // not for this process's own children
// An orphan is re-parented (to init or a subreaper), so a changed ppid means the parent is
// gone. Polled: Linux can signal a child on its parent's death only through prctl, which Node
// does not expose; a check costs one getppid() call.
const CHECK_MS = 500;

if (Number.isInteger(parent) && parent > 1) {
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    process.stderr.write(`svc: the process that started this one (pid ${parent}) has gone; stopping (pid ${process.pid}).\n`);
    process.kill(process.pid, 'SIGTERM');
  }, CHECK_MS);
  timer.unref();
}
