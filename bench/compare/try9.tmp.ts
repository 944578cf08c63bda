const keep = setInterval(() => undefined, 1000);
import { ensureDatabase } from "./env.ts";
import { Progress } from "./progress.ts";
import { s9 } from "./workflows.ts";
import { okengineWorkflows } from "./okengine-workflows.ts";
import { dbosWorkflows } from "./dbos.ts";
await ensureDatabase();
const sizes = { s1: 300, s2: 5000, s3: 5000, s4: 100, s5Keys: 100, s5PerKey: 20, s6: 500, s6Retries: 1, s7Jobs: 40, s9: 500, s9Sleeps: 50, capSeconds: 8, latencyCapSeconds: 4, repeats: 1 };
const p = new Progress(9);
for (const s of [dbosWorkflows("5.3.0")]) {
  p.begin(s.id);
  const f = await s9(s, { sizes, progress: p });
  p.end(f.map((x) => `${x.metric}=${x.value?.toFixed(2)} ${x.unit}`).join(" | "));
}
process.exit(0);
