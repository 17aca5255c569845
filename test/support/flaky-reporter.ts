// A test that failed and then passed on its one retry (vitest.config.ts `retry: 1`) is a timing race
// in the test or the product, not a pass: it is named at the end of the run with its first failure,
// and written to `test-results/flaky.json`, so it is fixed rather than forgotten. The retry is the net
// that keeps one rare race on a 2-core machine from hiding 2,000 other results; it is never the fix.
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Reporter, TestCase, TestModule } from "vitest/node";

export interface FlakyTest {
  file: string;
  name: string;
  retries: number;
  firstFailure: string;
}

function* testCasesOf(modules: ReadonlyArray<TestModule>): Generator<TestCase> {
  for (const module of modules) yield* module.children.allTests();
}

/** The tests that passed only after a retry, with the first line of what failed before. */
export function flakyTests(modules: ReadonlyArray<TestModule>, root: string): FlakyTest[] {
  const flaky: FlakyTest[] = [];
  for (const test of testCasesOf(modules)) {
    const diagnostic = test.diagnostic();
    if (!diagnostic?.flaky) continue;
    const error = test.result().errors?.[0];
    flaky.push({
      file: path.relative(root, test.module.moduleId),
      name: test.fullName,
      retries: diagnostic.retryCount,
      firstFailure: (error?.message ?? "(no error kept)").split("\n")[0] ?? "",
    });
  }
  return flaky;
}

export default class FlakyReporter implements Reporter {
  private root = process.cwd();

  onInit(vitest: { config: { root: string } }): void {
    this.root = vitest.config.root;
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const flaky = flakyTests(modules, this.root);
    const dir = path.join(this.root, "test-results");
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, "flaky.json"), `${JSON.stringify(flaky, null, 2)}\n`);
    if (flaky.length === 0) return;
    const lines = flaky.map((t) => `  FLAKY ${t.file} > ${t.name}\n        first try: ${t.firstFailure}`);
    process.stdout.write(
      `\n${flaky.length} test(s) passed only on a retry — a race to fix (test-results/flaky.json):\n${lines.join("\n")}\n`,
    );
  }
}
