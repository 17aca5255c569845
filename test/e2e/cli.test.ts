// The shipped bundles' command lines (issue 40, item 9): a wrong flag or command is named with
// the closest known one, the command's usage line and exit 2; every command answers --help;
// `config check` validates without serving (exit 0, or 3 with every problem, --json for CI); a
// missing key file is a configuration error (3), not a usage error.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentBundle, collectorBundle, requireBundles, start } from "../support/process.js";

function run(bundle: string, args: string[]) {
  const result = spawnSync(process.execPath, [bundle, ...args], {
    encoding: "utf8",
    timeout: 30_000,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

let dir: string;
const file = (name: string, text: string) => {
  const at = path.join(dir, name);
  writeFileSync(at, text);
  return at;
};

beforeAll(() => {
  requireBundles();
  dir = mkdtempSync(path.join(os.tmpdir(), "ws-cli-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("usage errors", () => {
  it.each([
    [
      collectorBundle,
      ["serve", "--stnadalone"],
      "ws-collector serve: unknown option --stnadalone; did you mean --standalone?",
      "Usage: ws-collector serve [options]",
    ],
    [collectorBundle, ["serve", "--start-comand", "x"], "did you mean --start-command?", "Usage: ws-collector serve"],
    [
      collectorBundle,
      ["sevre"],
      'ws-collector: unknown command "sevre"; did you mean "serve"?',
      "Usage: ws-collector <command>",
    ],
    [
      collectorBundle,
      ["config", "chek", "f"],
      'ws-collector config: unknown command "chek"; did you mean "check"?',
      "Usage: ws-collector config check",
    ],
    [collectorBundle, ["token", "--namespce", "a"], "did you mean --namespace?", "Usage: ws-collector token"],
    [collectorBundle, ["replay", "--trce", "x"], "did you mean --trace?", "Usage: ws-collector replay"],
    [
      agentBundle,
      ["run", "--insecre"],
      "ws-agent run: unknown option --insecre; did you mean --insecure?",
      "Usage: ws-agent run [options]",
    ],
    [agentBundle, ["probe", "--jsn"], "did you mean --json?", "Usage: ws-agent probe"],
    [agentBundle, ["prbe"], 'unknown command "prbe"; did you mean "probe"?', "Usage: ws-agent <command>"],
    [
      agentBundle,
      ["lease", "status", "--jsn"],
      "ws-lease: unknown option --jsn; did you mean --json?",
      "Usage: ws-lease status",
    ],
    [agentBundle, ["run", "--config"], "--config needs a value", "Usage: ws-agent run"],
  ])("%s %j: exit 2, the closest flag and the usage line", (bundle, args, message, usage) => {
    const result = run(bundle, args);
    expect(result.status, result.stderr).toBe(2);
    expect(result.stderr).toContain(message);
    expect(result.stderr).toContain(usage);
    expect(result.stderr).toMatch(/Run '.+ --help' for usage\./);
    expect(result.stderr).not.toMatch(/ERR_PARSE_ARGS|at parseArgs|To specify a positional/);
  });
});

describe("--help", () => {
  it.each([
    [collectorBundle, ["serve"], /--start-command ARG/],
    [collectorBundle, ["config"], /config check \[FILE\]/],
    [collectorBundle, ["config", "check"], /--json/],
    [collectorBundle, ["token"], /--namespace NS/],
    [collectorBundle, ["keygen"], /keygen/],
    [collectorBundle, ["replay"], /--trace FILE/],
    [collectorBundle, ["whatif"], /--prometheus URL/],
    [collectorBundle, ["ssh-proxy"], /--link-file FILE/],
    [agentBundle, ["run"], /--collector HOST:PORT/],
    [agentBundle, ["probe"], /--window DUR/],
    [agentBundle, ["config", "check"], /--json/],
    [agentBundle, ["lease"], /ws-lease/],
    [agentBundle, ["seal"], /--dry-run/],
    [agentBundle, ["grow"], /--mount PATH/],
  ])("%s %j --help: exit 0, the command's own usage", (bundle, args, marker) => {
    const result = run(bundle, [...args, "--help"]);
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/Usage: /);
    expect(result.stdout).toMatch(marker);
  });

  it("documents the exit statuses in both programs' help", () => {
    for (const bundle of [collectorBundle, agentBundle]) {
      expect(run(bundle, ["--help"]).stdout).toMatch(/2 usage error.*\n?.*3 configuration error/);
    }
  });
});

describe("ws-collector config check", () => {
  it("validates a good file without serving it and prints what it resolves to (text and JSON)", () => {
    const key = file("token.key", `${"a".repeat(64)}\n`);
    // The interval the file sets is the one agent-lost-after is checked against (not the built-in 15s).
    const good = file(
      "good.yaml",
      `tokenKeyFile: ${key}\nreportInterval: 2s\npolicy:\n  defaults:\n    agent-lost-after: 20s\n`,
    );
    const text = run(collectorBundle, ["config", "check", good]);
    expect(text.status, text.stderr).toBe(0);
    expect(text.stdout).toContain(`${good} is valid`);
    expect(text.stdout).toMatch(/reportInterval\s+2s/);
    expect(text.stdout).toMatch(/policy\.agent-lost-after\s+20s/);
    const json = run(collectorBundle, ["config", "check", "--json", good]);
    expect(json.status, json.stderr).toBe(0);
    const answer = JSON.parse(json.stdout);
    expect(answer).toMatchObject({ ok: true, file: good, found: { mode: "standalone", reportInterval: "2s" } });
  });

  it("lists every problem of a bad file and exits 3 (--json: on stdout)", () => {
    const bad = file("bad.yaml", "listen: 1\ntick: 5 parsecs\n");
    const text = run(collectorBundle, ["config", "check", bad]);
    expect(text.status).toBe(3);
    expect(text.stderr).toContain(`${bad} has 2 problems`);
    expect(text.stderr).toContain('unknown setting "listen"');
    expect(text.stderr).toContain("tick");
    const json = run(collectorBundle, ["config", "check", "--json", bad]);
    expect(json.status).toBe(3);
    expect(JSON.parse(json.stdout)).toMatchObject({
      ok: false,
      file: bad,
      problems: [expect.stringContaining("listen"), expect.stringContaining("tick")],
    });
  });

  it("judges agent-lost-after against the reportInterval the file sets", () => {
    const key = file("token2.key", `${"b".repeat(64)}\n`);
    const bad = file(
      "interval.yaml",
      `tokenKeyFile: ${key}\nreportInterval: 20s\npolicy:\n  defaults:\n    agent-lost-after: 30s\n`,
    );
    const result = run(collectorBundle, ["config", "check", bad]);
    expect(result.status).toBe(3);
    expect(result.stderr).toContain("agent-lost-after (30s) must be at least twice report-interval (20s)");
  });

  it("is a configuration error (3) when the key file the config names is missing", () => {
    const missingKey = file("no-key.yaml", `tokenKeyFile: ${path.join(dir, "absent.key")}\n`);
    const result = run(collectorBundle, ["config", "check", missingKey]);
    expect(result.status).toBe(3);
    expect(result.stderr).toMatch(/cannot read key file .*absent\.key: ENOENT/);
  });
});

describe("a missing key file", () => {
  it("is a configuration error (3), not a usage error, for serve and for token", () => {
    const absent = path.join(dir, "nothing-here.key");
    const serve = run(collectorBundle, [
      "serve",
      "--standalone",
      "--key-file",
      absent,
      "--grpc-listen",
      "127.0.0.1:0",
      "--http-listen",
      "127.0.0.1:0",
    ]);
    expect(serve.status, serve.stderr).toBe(3);
    expect(serve.stderr).toMatch(
      /cannot read key file .*nothing-here\.key: ENOENT \(create one with: ws-collector keygen/,
    );
    expect(serve.stderr).not.toMatch(/--help/);
    const token = run(collectorBundle, ["token", "--namespace", "a", "--name", "b", "--key-file", absent]);
    expect(token.status).toBe(3);
  });
});

describe("serve --start-command", () => {
  it("is the standalone start action, one argv entry per flag, as --stop-command is the stop", async () => {
    const key = file("serve.key", `${"c".repeat(64)}\n`);
    const collector = start(collectorBundle, [
      "serve",
      "--standalone",
      "--key-file",
      key,
      "--grpc-listen",
      "127.0.0.1:0",
      "--http-listen",
      "127.0.0.1:0",
      "--stop-command",
      "virsh",
      "--stop-command",
      "shutdown",
      "--stop-command",
      "{name}",
      "--start-command",
      "virsh",
      "--start-command",
      "start",
      "--start-command",
      "{name}",
    ]);
    try {
      const [line] = await collector.waitFor(/msg="collector serving".*/);
      expect(line).toContain('stop="virsh shutdown {name}"');
      expect(line).toContain('start="virsh start {name}"');
    } finally {
      await collector.stop();
    }
  });
});

describe("ws-agent config check", () => {
  it("validates the agent's configuration without running, never printing the token", () => {
    const good = file(
      "agent.yaml",
      'collector:\n  address: "collector.example:7443"\n  insecure: true\nvm: { namespace: lab, name: ws-1 }\ntoken: "s3cret-token"\n',
    );
    const result = run(agentBundle, ["config", "check", good]);
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/collector\s+collector\.example:7443/);
    expect(result.stdout).toMatch(/vm\s+lab\/ws-1/);
    expect(result.stdout).not.toContain("s3cret-token");
    const json = JSON.parse(run(agentBundle, ["config", "check", good, "--json"]).stdout);
    expect(json).toMatchObject({ ok: true, found: { token: "set", vm: "lab/ws-1" } });
  });

  it("exits 3 with every problem of a bad configuration", () => {
    const bad = file("agent-bad.yaml", "vm: { namespace: lab }\nreportInterval: 15 parsecs\ncolour: blue\n");
    const result = run(agentBundle, ["config", "check", bad]);
    expect(result.status).toBe(3);
    expect(result.stderr).toMatch(/has \d+ problems/);
    expect(result.stderr).toMatch(/colour/);
    expect(result.stderr).toMatch(/parsecs/);
  });
});
