import { readFile } from "node:fs/promises";
import { sink } from "./sink.js";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { replayCommand } from "../../../src/offline/replay/command.js";

const ROOT = fileURLToPath(new URL("../../../../../", import.meta.url));
const EXAMPLE = "docs/examples/idle-then-stop.trace.jsonl";

/** Runs the command with files from `files` (by path) or, failing that, from the repository. */
async function run(argv: string[], files: Record<string, string> = {}) {
  const stdout = sink();
  const stderr = sink();
  const code = await replayCommand(argv, {
    stdout,
    stderr,
    readFile: async (path) => {
      if (path in files) return files[path]!;
      return readFile(path.startsWith("/") ? path : `${ROOT}${path}`, "utf8");
    },
  });
  return { code, stdout: stdout.text, stderr: stderr.text };
}

describe("ws-collector replay", () => {
  it("prints the timeline shown in docs/replay.md for the example trace", async () => {
    const { code, stdout, stderr } = await run(["--trace", EXAMPLE]);
    expect(stderr).toBe("");
    expect(code).toBe(0);
    const doc = await readFile(`${ROOT}docs/replay.md`, "utf8");
    const block = /<!-- replay-output:start[^>]*-->\n```\n\$ [^\n]*\n([\s\S]*?)```\n<!-- replay-output:end -->/.exec(
      doc,
    );
    expect(block, "docs/replay.md has the replay-output block").not.toBeNull();
    expect(stdout).toBe(block![1]);
  });

  it("--json prints one parseable object per line with explanations", async () => {
    const { code, stdout } = await run(["replay", "--trace", EXAMPLE, "--json"]);
    expect(code).toBe(0);
    const entries = stdout
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line));
    const stop = entries.find((entry) => entry.kind === "decision" && entry.to === "Stopping");
    expect(stop).toMatchObject({
      t: 948,
      from: "StoppingPending",
      actions: expect.arrayContaining([expect.objectContaining({ kind: "stop", trigger: "idle" })]),
    });
    expect(stop.explanation).toMatchObject({ idleTimeoutSeconds: 300, lastActivityAtMs: 528_000, stopAtMs: 948_000 });
  });

  it("--vm filters, --tick 0s gives the same decisions", async () => {
    const all = await run(["--trace", EXAMPLE, "--tick", "0s", "--vm", "demo/alice"]);
    const ticked = await run(["--trace", EXAMPLE]);
    expect(all.stdout).toBe(ticked.stdout);
    const other = await run(["--trace", EXAMPLE, "--vm", "demo/bob"]);
    expect(other.stderr).toMatch(/no events for VM demo\/bob/);
  });

  it("applies the policy section of a collector config", async () => {
    const trace = [
      JSON.stringify({ t: 0, vm: "lab/a", policy: { profile: "teaching" } }),
      JSON.stringify({
        t: 0,
        vm: "lab/a",
        report: { intervalSeconds: 15, sessions: { sessions: [{ tty: "pts/0", inputAgeSeconds: 0 }] } },
      }),
      JSON.stringify({ t: 1800, vm: "lab/a", event: "agent-disconnected" }),
    ].join("\n");
    const config =
      "grpc:\n  listen: 0.0.0.0:7443\npolicy:\n  defaults:\n    autostop: enabled\n    agent-lost-after: 1h\n  profiles:\n    teaching: { idle-timeout: 10m, grace-period: 5m }\n";
    const { code, stdout } = await run(["--trace", "t.jsonl", "--config", "c.yaml"], {
      "t.jsonl": trace,
      "c.yaml": config,
    });
    expect(code).toBe(0);
    expect(stdout).toMatch(/\+00:10:00 {2}lab\/a {2}Active → StoppingPending/);
    expect(stdout).toMatch(/\+00:15:00 {2}lab\/a {2}StoppingPending → Stopping/);
  });

  it.each([
    [[], /replay needs --trace FILE/],
    [["--trace"], /--trace needs a value/],
    [["--trace", "x", "--colour"], /unknown option --colour/],
    [["--trace", "x", "extra"], /unexpected argument "extra"/],
    [["--trace", "x", "--tick", "fast"], /--tick "fast" is not a duration/],
  ])("%j is a usage error: exit 2 with a clear message", async (argv, message) => {
    const { code, stderr, stdout } = await run(argv as string[]);
    expect(code).toBe(2);
    expect(stderr).toMatch(message);
    expect(stderr).toMatch(/ws-collector replay --help/);
    expect(stdout).toBe("");
  });

  it("--help prints usage and exits 0", async () => {
    const { code, stdout } = await run(["--help"]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^Usage: ws-collector replay --trace FILE/);
  });

  it("a malformed trace exits 1 naming the line", async () => {
    const { code, stderr } = await run(["--trace", "bad.jsonl"], {
      "bad.jsonl": '{"t":0,"vm":"a/b","event":"agent-connected"}\n{"t":1,"vm":"a/b","report":{"sequence":"x"}}\n',
    });
    expect(code).toBe(1);
    expect(stderr).toMatch(/bad\.jsonl: line 2: "report" is not a Report/);
  });

  it("a missing trace exits 1", async () => {
    const { code, stderr } = await run(["--trace", "/nonexistent/trace.jsonl"]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/cannot read trace \/nonexistent\/trace\.jsonl: ENOENT/);
  });

  it("an invalid config is a configuration error: exit 3 with every problem", async () => {
    const { code, stderr } = await run(["--trace", EXAMPLE, "--config", "c.yaml"], {
      "c.yaml": "policy:\n  defaults:\n    idle-timeout: soon\n    grace: 5m\n",
    });
    expect(code).toBe(3);
    expect(stderr).toMatch(/policy\.defaults\.idle-timeout \(soon\): "soon" is not a duration/);
    expect(stderr).toMatch(/policy\.defaults\.grace \(5m\): unknown setting "grace"; did you mean "grace-period"\?/);
  });
});
