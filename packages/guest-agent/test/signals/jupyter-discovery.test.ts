/**
 * Discovery over a fixture machine tree: which runtime files are found where, and which are
 * stale. The proc root is a fixture too, so "is this pid alive" is decided by the tree.
 */
import { copyFile, mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Roots } from "../../src/roots.js";
import { discoverServers, runtimeDirs } from "../../src/signals/jupyter-discovery.js";
import { loadUsers } from "../../src/users.js";

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "jupyter");
const RUNTIME = path.join(".local", "share", "jupyter", "runtime");

describe("Jupyter runtime file discovery", () => {
  let scratch: string;
  let roots: Roots;
  let machine: string;

  async function place(fixture: string, dir: string, name: string): Promise<string> {
    await mkdir(dir, { recursive: true });
    const file = path.join(dir, name);
    await copyFile(path.join(fixtures, fixture), file);
    return file;
  }

  async function alive(...pids: number[]) {
    for (const pid of pids) await mkdir(path.join(roots.proc, String(pid)), { recursive: true });
  }

  beforeAll(async () => {
    scratch = await mkdtemp(path.join(os.tmpdir(), "ws-jupyter-discovery-"));
    machine = path.join(scratch, "machine");
    roots = {
      proc: path.join(machine, "proc"),
      sys: path.join(machine, "sys"),
      dev: path.join(machine, "dev"),
      run: path.join(machine, "run"),
      home: path.join(machine, "home"),
      etc: path.join(machine, "etc"),
      state: path.join(machine, "state"),
    };
    await mkdir(roots.etc, { recursive: true });
    await writeFile(
      path.join(roots.etc, "passwd"),
      [
        "root:x:0:0:root:/root:/bin/bash",
        "alice:x:1000:1000::/home/alice:/bin/bash",
        "svc:x:998:998::/var/lib/svc:/usr/sbin/nologin",
      ].join("\n"),
    );
  });

  afterAll(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  it("looks in every home's runtime dir, passwd homes and /root included, and in /run/user/UID/jupyter", async () => {
    await mkdir(path.join(roots.home, "alice", RUNTIME), { recursive: true });
    await mkdir(path.join(roots.home, "zed", RUNTIME), { recursive: true }); // a home passwd does not know
    await mkdir(path.join(machine, "var", "lib", "svc", RUNTIME), { recursive: true });
    await mkdir(path.join(machine, "root", RUNTIME), { recursive: true });
    await mkdir(path.join(roots.run, "user", "1000", "jupyter"), { recursive: true });
    await mkdir(path.join(roots.run, "user", "1001"), { recursive: true }); // no jupyter dir
    // The same dir reached twice (a symlinked home) is read once.
    await symlink(path.join(roots.home, "alice"), path.join(roots.home, "alice-link"));

    const { dirs, problems } = await runtimeDirs(roots, await loadUsers(roots));
    expect(problems).toEqual([]);
    expect(dirs.map((dir) => dir.path)).toEqual(
      [
        path.join(roots.home, "alice", RUNTIME),
        path.join(roots.home, "zed", RUNTIME),
        path.join(machine, "root", RUNTIME),
        path.join(roots.run, "user", "1000", "jupyter"),
        path.join(machine, "var", "lib", "svc", RUNTIME),
      ].sort(),
    );
  });

  it("keeps live servers, skips stale files, and reports a broken file of a live pid", async () => {
    const aliceDir = path.join(roots.home, "alice", RUNTIME);
    const live = await place("jpserver-plain.json", aliceDir, "jpserver-9555.json"); // pid 9555 inside
    const legacy = await place(
      "nbserver-legacy.json",
      path.join(roots.run, "user", "1000", "jupyter"),
      "nbserver-4242.json",
    );
    const stale = await place("jpserver-https-base-url.json", aliceDir, "jpserver-9598.json"); // pid 9598: gone
    const staleHalfWritten = await place("jpserver-truncated.json", aliceDir, "jpserver-777.json"); // gone
    const liveHalfWritten = await place(
      "jpserver-truncated.json",
      path.join(machine, "root", RUNTIME),
      "jpserver-888.json",
    );
    await place("jpserver-plain.json", aliceDir, "jpserver-9555-open.html"); // not a runtime file
    await alive(9555, 4242, 888);

    const found = await discoverServers(roots, await loadUsers(roots));
    expect(found.servers.map((s) => [s.runtimeFile, s.pid])).toEqual([
      [live, 9555],
      [legacy, 4242],
    ]);
    expect(found.staleFiles.sort()).toEqual([stale, staleHalfWritten].sort());
    expect(found.problems).toEqual([expect.stringMatching(new RegExp(`^${liveHalfWritten}: runtime file: not JSON`))]);
  });
});
