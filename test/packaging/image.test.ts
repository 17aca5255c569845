// The collector image, built from packaging/docker/Dockerfile with buildah (no Docker daemon),
// run, and asked /healthz. Docker Hub is out of reach here, so the Dockerfile's NODE_IMAGE build
// arg names a base made from Debian packages: a minbase root of this machine's release
// (debootstrap, cached by lib/debian-root.ts) plus this Node.js binary, the same Node major as
// the pinned node:X-bookworm-slim. Everything else is the shipped Dockerfile and its ignore file.
// Storage is the vfs driver under a directory of the test's own; buildah runs with chroot
// isolation and the host network, so the container's HTTP port is reachable on loopback.
import { spawn, type ChildProcess } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { collectorBundle, eventually, freePort, getText, repoRoot } from "../support/process.js";
import { makeDebianRoot } from "./lib/debian-root.js";
import { requireCommand, run, runOk } from "./lib/tools.js";

const BASE = "localhost/ws-test/node-base:debian";
const IMAGE = "localhost/ws-test/ws-collector:test";

let work: string;
let buildah: (args: string[]) => ReturnType<typeof run>;
let config: {
  Entrypoint?: string[];
  Cmd?: string[];
  User?: string;
  ExposedPorts?: Record<string, unknown>;
  WorkingDir?: string;
  Env?: string[];
};
let running: ChildProcess | undefined;
let runOutput = "";

beforeAll(() => {
  requireCommand("buildah", "buildah");
  requireCommand("tar", "tar");
  if (!statSync(collectorBundle, { throwIfNoEntry: false }))
    throw new Error(`${collectorBundle} is missing: run 'node scripts/build.mjs'`);
  work = mkdtempSync(path.join(os.tmpdir(), "ws15-image-"));
  const storage = [
    "--root",
    path.join(work, "storage"),
    "--runroot",
    path.join(work, "run"),
    "--storage-driver",
    "vfs",
  ];
  buildah = (args) =>
    run("buildah", [...storage, ...args], { cwd: repoRoot, env: { ...process.env, BUILDAH_ISOLATION: "chroot" } });
  const ok = (args: string[]) => {
    const result = buildah(args);
    if (result.status !== 0) throw new Error(`buildah ${args.join(" ")} failed:\n${result.output.slice(-4000)}`);
    return result.stdout.trim();
  };

  // The base: Debian minbase + this Node.js.
  const rootfs = path.join(work, "rootfs");
  makeDebianRoot(rootfs, { include: ["libstdc++6", "ca-certificates"] });
  mkdirSync(path.join(rootfs, "usr/local/bin"), { recursive: true });
  copyFileSync(process.execPath, path.join(rootfs, "usr/local/bin/node"));
  chmodSync(path.join(rootfs, "usr/local/bin/node"), 0o755);
  runOk("tar", ["--numeric-owner", "-C", rootfs, "-cf", path.join(work, "base.tar"), "."]);
  rmSync(rootfs, { recursive: true, force: true });
  const baseCtr = ok(["from", "scratch"]);
  ok(["add", baseCtr, path.join(work, "base.tar"), "/"]);
  ok(["config", "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", baseCtr]);
  ok(["commit", "--quiet", baseCtr, BASE]);
  ok(["rm", baseCtr]);
  rmSync(path.join(work, "base.tar"), { force: true });

  // The shipped Dockerfile, the shipped ignore file, the repository root as context.
  const built = buildah([
    "bud",
    "--quiet",
    "--isolation",
    "chroot",
    "--pull-never",
    "--ignorefile",
    "packaging/docker/Dockerfile.dockerignore",
    "--build-arg",
    `NODE_IMAGE=${BASE}`,
    "-f",
    "packaging/docker/Dockerfile",
    "-t",
    IMAGE,
    ".",
  ]);
  if (built.status !== 0) throw new Error(`buildah bud failed:\n${built.output.slice(-4000)}`);
  const inspect = JSON.parse(ok(["inspect", "--type", "image", IMAGE])) as { OCIv1: { config: typeof config } };
  config = inspect.OCIv1.config;
}, 900_000);

afterAll(async () => {
  if (running && running.exitCode === null) {
    running.kill("SIGTERM");
    await new Promise((resolve) => running!.once("exit", resolve));
  }
  if (work) {
    buildah(["rm", "--all"]);
    rmSync(work, { recursive: true, force: true });
  }
});

describe("the collector image, built with buildah", () => {
  it("has the Dockerfile's user, entrypoint, command and ports", () => {
    expect(config.User).toBe("10001:10001");
    expect(config.Entrypoint).toEqual(["node", "/app/ws-collector.cjs"]);
    expect(config.Cmd).toEqual(["serve", "--config", "/etc/ws-collector/config.yaml"]);
    expect(Object.keys(config.ExposedPorts ?? {}).sort()).toEqual(["7443/tcp", "8080/tcp", "9090/tcp"]);
    expect(config.Env).toContain("NODE_ENV=production");
  });

  it("holds the bundle, byte for byte, read-only and owned by root, and nothing else of the repository", () => {
    const ctr = buildah(["from", "--quiet", "--pull-never", IMAGE]).stdout.trim();
    const mount = buildah(["mount", ctr]).stdout.trim();
    try {
      const shipped = path.join(mount, "app/ws-collector.cjs");
      expect(readFileSync(shipped).equals(readFileSync(collectorBundle))).toBe(true);
      const info = statSync(shipped);
      expect(info.mode & 0o777).toBe(0o444);
      expect([info.uid, info.gid]).toEqual([0, 0]);
      expect(
        run("ls", ["-A", path.join(mount, "app")])
          .stdout.trim()
          .split("\n"),
      ).toEqual(["ws-collector.cjs"]);
    } finally {
      buildah(["umount", ctr]);
      buildah(["rm", ctr]);
    }
  });

  it("runs its entrypoint and command as uid 10001, and serves /healthz and /readyz", async () => {
    const etc = path.join(work, "etc-ws-collector");
    mkdirSync(etc, { recursive: true });
    const key = runOk(process.execPath, [collectorBundle, "keygen"]).stdout;
    // Readable by the image's uid, as the Deployment's projected volume (mode 0440, fsGroup) makes it.
    writeFileSync(path.join(etc, "token.key"), key, { mode: 0o644 });
    const httpPort = await freePort();
    const grpcPort = await freePort();
    writeFileSync(
      path.join(etc, "config.yaml"),
      `mode: standalone\ngrpc: { listen: "127.0.0.1:${grpcPort}" }\nhttp: { listen: "127.0.0.1:${httpPort}" }\ntokenKeyFile: /etc/ws-collector/token.key\n`,
      { mode: 0o644 },
    );
    const ctr = buildah(["from", "--quiet", "--pull-never", IMAGE]).stdout.trim();
    // The image's own ENTRYPOINT and CMD, as a container runtime would start them.
    const argv = [...(config.Entrypoint ?? []), ...(config.Cmd ?? [])];
    running = spawn(
      "buildah",
      [
        "--root",
        path.join(work, "storage"),
        "--runroot",
        path.join(work, "run"),
        "--storage-driver",
        "vfs",
        "run",
        "--isolation",
        "chroot",
        "--network",
        "host",
        "--volume",
        `${etc}:/etc/ws-collector:ro`,
        ctr,
        "--",
        ...argv,
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    running.stdout!.on("data", (chunk: Buffer) => (runOutput += chunk.toString()));
    running.stderr!.on("data", (chunk: Buffer) => (runOutput += chunk.toString()));
    const health = await eventually(
      async () => {
        if (running!.exitCode !== null) throw new Error(`the container exited ${running!.exitCode}:\n${runOutput}`);
        return (await getText(`http://127.0.0.1:${httpPort}/healthz`).catch(() => undefined)) ?? false;
      },
      120_000,
      `/healthz of the container on 127.0.0.1:${httpPort}`,
    );
    expect(health).toEqual({ status: 200, body: "ok\n" });
    expect(await getText(`http://127.0.0.1:${httpPort}/readyz`)).toEqual({ status: 200, body: "ready (leader)\n" });
    expect(runOutput).toMatch(/collector serving/);
    // The process inside runs as the image's USER, not root.
    const uid = buildah([
      "run",
      "--isolation",
      "chroot",
      ctr,
      "--",
      "node",
      "-e",
      "process.stdout.write(String(process.getuid()))",
    ]);
    expect(uid.stdout, uid.output).toBe("10001");
  });
});
