/**
 * The cache of safe walks between samples: what it may remember (absent paths, small files read,
 * a heartbeat's identity), what it must notice (any entry created, removed, renamed or rewritten
 * below a remembered walk, even with the mtime put back), and what it never remembers (refusals,
 * walks of directories changed too recently to trust their ctime). Real files; the tests run as
 * root and chown to play the user.
 */
import { execFileSync } from "node:child_process";
import { chown, mkdir, mkdtemp, rename, rm, stat, symlink, utimes, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UserPathError } from "../../src/fs/user-file.js";
import { RACY_MS, UserPathCache } from "../../src/fs/user-path-cache.js";

const USER = 4242;
const RUNTIME = [".local", "share", "jupyter", "runtime"];
const HEARTBEAT = [".local", "share", "code-server", "heartbeat"];
const isRuntime = (name: string) => name.endsWith(".json");
/** The sample's time, well after every change the test makes: the racy check does not hold the walks back. */
const settled = () => Date.now() + 10 * RACY_MS;

describe("UserPathCache", () => {
  let trusted: string;
  let count = 0;

  beforeAll(async () => {
    trusted = await mkdtemp(path.join(os.tmpdir(), "ws-user-path-cache-"));
  });

  afterAll(async () => {
    await rm(trusted, { recursive: true, force: true });
  });

  /** A fresh home owned by the user, with .local/share in it (what most homes have). */
  async function newHome(): Promise<string> {
    const name = `home${count++}`;
    const home = path.join(trusted, name);
    await mkdir(path.join(home, ".local", "share"), { recursive: true });
    for (const dir of [home, path.join(home, ".local"), path.join(home, ".local", "share")])
      await chown(dir, USER, USER);
    return name;
  }

  const runtimeOf = (name: string) => ({
    trusted,
    segments: [name, ...RUNTIME],
    read: { names: isRuntime, maxBytes: 64 * 1024 },
  });

  async function sample<T>(cache: UserPathCache, work: () => Promise<T>): Promise<T> {
    cache.beginSample();
    return work();
  }

  it("remembers an absent runtime dir, and walks again once a directory on the way changes", async () => {
    const home = await newHome();
    const cache = new UserPathCache();
    expect(await sample(cache, () => cache.listDir(runtimeOf(home), settled()))).toBeUndefined();
    expect(await sample(cache, () => cache.listDir(runtimeOf(home), settled()))).toBeUndefined();
    expect(cache.counts).toEqual({ walked: 1, remembered: 1 });

    await mkdir(path.join(trusted, home, ...RUNTIME), { recursive: true });
    await writeFile(path.join(trusted, home, ...RUNTIME, "jpserver-1.json"), '{"port": 1}');
    const listing = await sample(cache, () => cache.listDir(runtimeOf(home), settled()));
    expect(listing).toMatchObject({ names: ["jpserver-1.json"] });
    expect(cache.counts.walked).toBe(2);
  });

  it("notices an entry created with the directory's mtime put back (ctime cannot be)", async () => {
    const home = await newHome();
    const share = path.join(trusted, home, ".local", "share");
    const cache = new UserPathCache();
    const before = await stat(share, { bigint: true });
    expect(await sample(cache, () => cache.listDir(runtimeOf(home), settled()))).toBeUndefined();

    await mkdir(path.join(share, "jupyter", "runtime"), { recursive: true });
    await writeFile(path.join(share, "jupyter", "runtime", "jpserver-2.json"), '{"port": 2}');
    // As the user could: `touch -d` to the nanosecond the directory had before.
    const [seconds, nanos] = [before.mtimeNs / 1_000_000_000n, before.mtimeNs % 1_000_000_000n];
    execFileSync("touch", ["-m", "-d", `@${seconds}.${String(nanos).padStart(9, "0")}`, share]);
    expect((await stat(share, { bigint: true })).mtimeNs).toBe(before.mtimeNs);
    expect(await sample(cache, () => cache.listDir(runtimeOf(home), settled()))).toMatchObject({
      names: ["jpserver-2.json"],
    });
  });

  it("reads a runtime file again when it is rewritten in place, the directory unchanged", async () => {
    const home = await newHome();
    const runtime = path.join(trusted, home, ...RUNTIME);
    await mkdir(runtime, { recursive: true });
    const file = path.join(runtime, "jpserver-3.json");
    await writeFile(file, '{"port": 3}');
    const cache = new UserPathCache();
    const first = await sample(cache, () => cache.listDir(runtimeOf(home), settled()));
    const second = await sample(cache, () => cache.listDir(runtimeOf(home), settled()));
    expect(second).toBe(first);
    expect(cache.counts).toEqual({ walked: 1, remembered: 1 });

    const runtimeBefore = await stat(runtime);
    await writeFile(file, '{"port": 4}'); // same inode, same size: only its mtime and ctime move
    expect((await stat(runtime)).ctimeMs).toBe(runtimeBefore.ctimeMs);
    const third = await sample(cache, () => cache.listDir(runtimeOf(home), settled()));
    expect(third).not.toBeInstanceOf(UserPathError);
    const read = (third as { files: Map<string, unknown> }).files.get("jpserver-3.json") as { data: Buffer };
    expect(read.data.toString()).toBe('{"port": 4}');
  });

  it("never remembers a refusal: a FIFO is refused again each sample", async () => {
    const home = await newHome();
    const codeServer = path.join(trusted, home, ".local", "share", "code-server");
    await mkdir(codeServer, { recursive: true });
    execFileSync("mkfifo", [path.join(codeServer, "heartbeat")]);
    const cache = new UserPathCache();
    const options = { trusted, segments: [home, ...HEARTBEAT] };
    for (let i = 0; i < 2; i++) {
      const found = await sample(cache, () => cache.statFile(options, settled()));
      expect(found).toBeInstanceOf(UserPathError);
      expect((found as UserPathError).message).toMatch(/a FIFO, not a regular file/);
    }
    expect(cache.counts).toEqual({ walked: 2, remembered: 0 });
  });

  it("answers for a directory reached through a swapped-in link only what that directory holds, and refuses the link at the next change", async () => {
    const home = await newHome();
    const local = path.join(trusted, home, ".local");
    const cache = new UserPathCache();
    expect(await sample(cache, () => cache.listDir(runtimeOf(home), settled()))).toBeUndefined();

    // .local becomes a link to where it now lives: the path reaches the very same share directory.
    const elsewhere = path.join(trusted, home, "elsewhere");
    await rename(local, elsewhere);
    await symlink(elsewhere, local);
    // Its entries are unchanged, so the answer is still theirs (nothing in it), and nothing is read through the link.
    expect(await sample(cache, () => cache.listDir(runtimeOf(home), settled()))).toBeUndefined();
    // Anything created in it changes its ctime: the walk is made afresh, and refuses the link.
    await mkdir(path.join(elsewhere, "share", "jupyter"));
    const found = await sample(cache, () => cache.listDir(runtimeOf(home), settled()));
    expect(found).toBeInstanceOf(UserPathError);
    expect((found as UserPathError).problem).toBe("symlink");
  });

  it("reads a heartbeat's fresh mtime each sample from its remembered walk, and walks again when it is replaced", async () => {
    const home = await newHome();
    const codeServer = path.join(trusted, home, ".local", "share", "code-server");
    await mkdir(codeServer, { recursive: true });
    await chown(codeServer, USER, USER);
    const heartbeat = path.join(codeServer, "heartbeat");
    await writeFile(heartbeat, "");
    await chown(heartbeat, USER, USER);
    const options = { trusted, segments: [home, ...HEARTBEAT] };
    const cache = new UserPathCache();
    const first = await sample(cache, () => cache.statFile(options, settled()));
    expect(first).toMatchObject({ uid: USER, path: heartbeat });

    const later = new Date(Math.floor(Date.now() / 1000) * 1000 + 60_000);
    await utimes(heartbeat, later, later); // code-server touches it in place
    const second = await sample(cache, () => cache.statFile(options, settled()));
    expect(second).toMatchObject({ mtimeMs: later.getTime() });
    expect(cache.counts).toEqual({ walked: 1, remembered: 1 });

    // Replaced by a file of another owner: the name now names another inode, so it is walked, and refused.
    await writeFile(path.join(codeServer, "other"), "");
    await chown(path.join(codeServer, "other"), USER + 1, USER + 1);
    await rename(path.join(codeServer, "other"), heartbeat);
    const third = await sample(cache, () => cache.statFile(options, settled()));
    expect((third as UserPathError).problem).toBe("wrong-owner");
    expect(cache.counts.walked).toBe(2);
  });

  it("does not remember a walk of directories changed within RACY_MS of the sample", async () => {
    const home = await newHome();
    const cache = new UserPathCache();
    const now = Date.now();
    expect(await sample(cache, () => cache.listDir(runtimeOf(home), now))).toBeUndefined();
    expect(await sample(cache, () => cache.listDir(runtimeOf(home), now))).toBeUndefined();
    expect(cache.counts).toEqual({ walked: 2, remembered: 0 });
  });

  it("forgets walks a sample did not ask for", async () => {
    const [a, b] = [await newHome(), await newHome()];
    const cache = new UserPathCache();
    await sample(cache, async () => {
      await cache.listDir(runtimeOf(a), settled());
      await cache.listDir(runtimeOf(b), settled());
    });
    expect(cache.size).toBe(2);
    await sample(cache, () => cache.listDir(runtimeOf(a), settled()));
    cache.beginSample();
    expect(cache.size).toBe(1);
  });
});
