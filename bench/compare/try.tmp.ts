import { ensureDatabase } from "/work/main/bench/compare/env.ts";
import { Progress } from "/work/main/bench/compare/progress.ts";
import * as sc0 from "/work/main/bench/compare/scenarios.ts";
import { s7 } from "/work/main/bench/compare/crash.ts";
const sc = { ...sc0, s7 };
import { queueSystems } from "/work/main/bench/compare/systems.ts";
const only = process.argv[2]!.split(",");
const scen = process.argv[3]!.split(",") as Array<"s1"|"s2"|"s3"|"s4"|"s5"|"s6"|"s7">;
await ensureDatabase();
const sizes = { s1: 300, s2: 5000, s3: 5000, s4: 100, s5Keys: 100, s5PerKey: 20, s6: 500, s6Retries: 1, s7Jobs: 40, s9: 200, s9Sleeps: 20, capSeconds: 8, latencyCapSeconds: 4, repeats: 1 };
const p = new Progress(99);
for (const s of queueSystems().filter((x) => only.includes(x.id))) {
  for (const k of scen) {
    p.begin(`${k} ${s.id}`);
    const f = await sc[k](s, { sizes, progress: p });
    p.end(f.map((x) => `${x.metric}=${x.value?.toFixed(2)} ${x.unit} ${x.note ?? ""}`).join(" | "));
  }
}
process.exit(0);
