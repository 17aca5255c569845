// The retry net (vitest.config.ts) must never turn a race into silence: a test that passes only on
// its retry is named with its first failure, and one that fails twice still fails the run. Runs
// vitest itself on two throwaway test files with this repository's reporter.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const root = path.resolve(import.meta.dirname, "..");
mkdirSync(path.join(root, "test-results"), { recursive: true });
const dir = mkdtempSync(path.join(root, "test-results", "flaky-probe-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function runVitest(testSource: string) {
  writeFileSync(path.join(dir, "probe.test.ts"), testSource);
  writeFileSync(
    path.join(dir, "vitest.config.mjs"),
    `export default { test: { include: ["probe.test.ts"], retry: 1, reporters: ["default", ${JSON.stringify(
      path.join(root, "test/support/flaky-reporter.ts"),
    )}] } };\n`,
  );
  const run = spawnSync(process.execPath, [path.join(root, "node_modules/vitest/vitest.mjs"), "run", "--root", dir], {
    encoding: "utf8",
    env: { ...process.env, NO_COLOR: "1", FORCE_COLOR: "0" },
  });
  const flaky = JSON.parse(readFileSync(path.join(dir, "test-results/flaky.json"), "utf8"));
  return { status: run.status, output: run.stdout + run.stderr, flaky };
}

describe("the retry net", { timeout: 60_000 }, () => {
  it("names a test that passed only on its retry, with what failed first", () => {
    const run = runVitest(
      `import { it, expect } from "vitest";\nlet tries = 0;\nit("races", () => { tries++; expect(tries, "the first try").toBe(2); });\n`,
    );
    expect(run.status).toBe(0);
    expect(run.output).toContain("1 test(s) passed only on a retry");
    expect(run.output).toContain("FLAKY probe.test.ts > races");
    expect(run.flaky).toEqual([
      { file: "probe.test.ts", name: "races", retries: 1, firstFailure: expect.stringContaining("the first try") },
    ]);
  });

  it("still fails the run when the retry fails too, and calls nothing flaky", () => {
    const run = runVitest(`import { it, expect } from "vitest";\nit("broken", () => expect(1).toBe(2));\n`);
    expect(run.status).toBe(1);
    expect(run.output).not.toContain("FLAKY");
    expect(run.flaky).toEqual([]);
  });
});
