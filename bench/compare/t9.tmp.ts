import { okengineWorkflows } from "/work/main/bench/compare/okengine-workflows.ts";
const h = await okengineWorkflows("memory").open();
console.log("open");
await h.runThreeSteps(1);
console.log("three ok");
const d = await h.sleepOnce(2, 300);
console.log("slept", d);
await h.close();
