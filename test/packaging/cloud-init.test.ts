// The example per-VM user-data: valid for the real cloud-init's schema, and what it writes is a
// configuration the agent accepts as complete (collector, identity, token from the 0600 file).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { resolveAgentConfig } from "../../packages/guest-agent/src/config.js";
import { repoRoot } from "../support/process.js";
import { requireCommand, run } from "./lib/tools.js";

const exampleFile = path.join(repoRoot, "packaging/cloud-init/user-data.example.yaml");

interface WriteFile {
  path: string;
  owner?: string;
  permissions?: string;
  content: string;
}
let userData: { write_files: WriteFile[]; runcmd: string[][] };
let work: string;

beforeAll(() => {
  userData = parse(readFileSync(exampleFile, "utf8")) as typeof userData;
  work = mkdtempSync(path.join(os.tmpdir(), "ws-cloud-init-"));
});

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

const written = (file: string) => {
  const entry = userData.write_files.find((f) => f.path === file);
  if (!entry) throw new Error(`the user-data writes no ${file}`);
  return entry;
};

describe("the example cloud-init user-data", () => {
  it("passes cloud-init's own schema validation", () => {
    requireCommand("cloud-init", "cloud-init");
    const result = run("cloud-init", ["schema", "--config-file", exampleFile]);
    expect(result.status, result.output).toBe(0);
    expect(result.stdout).toContain("Valid cloud-config");
  });

  it("writes an agent config the agent accepts as complete, reading the token from its file", () => {
    const config = written("/etc/ws-agent/config.yaml");
    const token = written("/etc/ws-agent/token");
    const tokenPath = path.join(work, "token");
    writeFileSync(tokenPath, token.content);
    const resolved = resolveAgentConfig({
      fileText: config.content,
      filePath: config.path,
      readTokenFile: (p) => {
        expect(p).toBe(token.path);
        return readFileSync(tokenPath, "utf8");
      },
      env: {},
      flags: {},
      requireCollector: true,
    });
    expect(resolved.collector.address).toBe("ws-collector.ws-system.svc.cluster.local:7443");
    expect(resolved.collector.insecure).toBe(false);
    expect(resolved.collector.caFile).toBe(written("/etc/ws-agent/collector-ca.crt").path);
    expect(resolved.vm).toEqual({ namespace: "team-a", name: "alice-workstation" });
    expect(resolved.token).toBe(token.content.trim());
  });

  it("keeps the token readable by root only, and the config out of the token's way", () => {
    expect(written("/etc/ws-agent/token")).toMatchObject({ owner: "root:root", permissions: "0600" });
    expect(written("/etc/ws-agent/config.yaml").content).not.toMatch(/^token:/m);
  });

  it("enables the service and restarts it without blocking cloud-final", () => {
    expect(userData.runcmd).toEqual([
      ["systemctl", "enable", "ws-agent.service"],
      ["systemctl", "restart", "--no-block", "ws-agent.service"],
    ]);
  });

  it("documents how the token is made", () => {
    expect(readFileSync(exampleFile, "utf8")).toContain(
      "ws-collector token --namespace team-a --name alice-workstation",
    );
  });
});
