import { createSignals } from "../packages/guest-agent/src/signals/index.js";
import { loadUsers } from "../packages/guest-agent/src/users.js";
import { resolveAgentConfig } from "../packages/guest-agent/src/config.js";
import { systemClock } from "../packages/guest-agent/src/clock.js";
import { takeSample } from "../packages/guest-agent/src/sampler.js";
const config = resolveAgentConfig({ fileText: undefined, filePath: "/x", readTokenFile: () => "", env: {}, flags: { homeRoot: process.argv[2] ?? "/home" }, requireCollector: false });
const N = Number(process.argv[3] ?? 50);
async function main() {
  const signals = createSignals(config);
  const users = await loadUsers(config.roots);
  const ctx = { roots: config.roots, clock: systemClock, users, signal: new AbortController().signal };
  for (const s of signals) {
    if (s.name === "gpu") continue;
    for (let i = 0; i < 3; i++) await s.collect(ctx);
    const c0 = process.cpuUsage(); const t0 = performance.now();
    for (let i = 0; i < N; i++) await s.collect(ctx);
    const c = process.cpuUsage(c0); const t = performance.now() - t0;
    console.log(`${s.name.padEnd(12)} cpu ${( (c.user + c.system) / 1000 / N).toFixed(3)} ms (u ${(c.user/1000/N).toFixed(3)} s ${(c.system/1000/N).toFixed(3)}) wall ${(t / N).toFixed(3)} ms`);
  }
  const c0 = process.cpuUsage();
  for (let i = 0; i < N; i++) await loadUsers(config.roots);
  const c = process.cpuUsage(c0);
  console.log(`loadUsers    cpu ${((c.user + c.system) / 1000 / N).toFixed(3)} ms`);
  const c1 = process.cpuUsage();
  for (let i = 0; i < N; i++) await takeSample(signals.filter(s=>s.name!=="gpu"), [], { roots: config.roots, clock: systemClock, users }, 5000, systemClock);
  const d = process.cpuUsage(c1);
  console.log(`takeSample   cpu ${((d.user + d.system) / 1000 / N).toFixed(3)} ms (u ${(d.user/1000/N).toFixed(3)} s ${(d.system/1000/N).toFixed(3)})`);
}
main();
