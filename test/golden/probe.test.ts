// node_exporter-style golden test: `ws-agent probe --json` (the shipped file)
// over a fixture machine tree equals the committed expected output, with the
// fields that depend on the moment (ages, durations, real statfs sizes) normalised.
// Regenerate after an intended change: UPDATE_GOLDEN=1 npx vitest run test/golden
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { mkdir, utimes, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { agentBundle, repoRoot, requireBundles } from "../support/process.js";
import { quietMachine, type QuietMachine } from "../support/quiet-machine.js";

const expectedFile = path.join(repoRoot, "test/golden/probe.expected.json");
let machine: QuietMachine;

beforeAll(async () => {
  requireBundles();
  machine = await quietMachine();
  const fixtures = path.join(repoRoot, "packages/guest-agent/test/fixtures");
  // An idle inhibitor lock held by pid 1 (present in the fixture /proc).
  await mkdir(path.join(machine.root, "run/systemd/inhibit"), { recursive: true });
  await mkdir(path.join(machine.root, "run/systemd/seats"), { recursive: true });
  const lock = readFileSync(path.join(fixtures, "inhibitors/idle-block-root"), "utf8").replace(/^PID=.*$/m, "PID=1");
  await writeFile(path.join(machine.root, "run/systemd/inhibit/1"), lock);
  // A code-server heartbeat an hour old.
  const heartbeat = path.join(machine.root, "home/wsbusy/.local/share/code-server/heartbeat");
  await mkdir(path.dirname(heartbeat), { recursive: true });
  await writeFile(heartbeat, "");
  const hourAgo = new Date(Date.now() - 3_600_000);
  await utimes(heartbeat, hourAgo, hourAgo);
});

afterAll(async () => {
  await machine.remove();
});

/** Replaces what changes from run to run; keeps every key so a new or missing field shows. */
function normalise(value: unknown, key = ""): unknown {
  if (Array.isArray(value)) return value.map((item) => normalise(item, key));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, normalise(v, k)]));
  }
  if (/durationSeconds|AgeSeconds$|^ageSeconds$|sampleAgeSeconds/.test(key)) return "<seconds>";
  if (/^(sizeBytes|usedBytes|availableBytes)$/.test(key)) return "<bytes>";
  if (typeof value === "string") return value.replace(/\/tmp\/ws-quiet-[^/ ]+/g, "<root>");
  return value;
}

it("probe --json over a fixture machine equals the golden output", () => {
  const result = spawnSync(
    process.execPath,
    [agentBundle, "probe", "--json", "--window", "100ms", ...machine.flags, "--mount", "/"],
    {
      encoding: "utf8",
      timeout: 60_000,
      env: { ...process.env, WS_AGENT_CONFIG: "/dev/null" },
    },
  );
  expect(result.stderr).toBe("");
  const actual = normalise(JSON.parse(result.stdout));
  if (process.env.UPDATE_GOLDEN === "1" || !existsSync(expectedFile)) {
    writeFileSync(expectedFile, `${JSON.stringify(actual, null, 2)}\n`);
  }
  expect(actual).toEqual(JSON.parse(readFileSync(expectedFile, "utf8")));
});
