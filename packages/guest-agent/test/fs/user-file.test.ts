/**
 * The safe reader against what a hostile user can put in their own home: FIFOs, links to
 * root-only files, files owned by others, huge sparse files, linked homes. Real files, real
 * mkfifo; the tests run as root (as the agent does) and chown to play the user.
 */
import { execFileSync } from "node:child_process";
import { chown, lchown, mkdir, mkdtemp, open, rm, symlink, truncate, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  Lanes,
  listUserDir,
  MAX_ENTRIES_SCANNED,
  readUserFile,
  statUserFile,
  UserPathError,
  type UserPathProblem,
} from "../../src/fs/user-file.js";

const USER = 4242;
const OTHER = 4343;
const SECRET = "root-only-secret-4f1c";

async function problemOf(work: Promise<unknown>): Promise<{ problem: UserPathProblem; message: string }> {
  try {
    await work;
  } catch (error) {
    if (error instanceof UserPathError) return { problem: error.problem, message: error.message };
    throw error;
  }
  throw new Error("expected the read to be refused");
}

describe("readUserFile / statUserFile / listUserDir", () => {
  let trusted: string;
  let home: string;
  let secretFile: string;

  beforeAll(async () => {
    trusted = await mkdtemp(path.join(os.tmpdir(), "ws-user-file-"));
    home = path.join(trusted, "alice");
    await mkdir(path.join(home, "dir"), { recursive: true });
    await chown(home, USER, USER);
    await chown(path.join(home, "dir"), USER, USER);
    secretFile = path.join(trusted, "secret");
    await writeFile(secretFile, SECRET, { mode: 0o600 });
  });

  afterAll(async () => {
    await rm(trusted, { recursive: true, force: true });
  });

  const at = (...segments: string[]) => ({ trusted, segments: ["alice", ...segments], maxBytes: 1024 });

  it("reads a regular file of the home's owner and says whose it is", async () => {
    const file = path.join(home, "dir", "ok.json");
    await writeFile(file, '{"port": 1}');
    await chown(file, USER, USER);
    const read = await readUserFile(at("dir", "ok.json"));
    expect(read).toMatchObject({ path: file, uid: USER, size: 11 });
    expect(read.data.toString()).toBe('{"port": 1}');
    expect(await statUserFile(at("dir", "ok.json"))).toMatchObject({ uid: USER, size: 11 });
    expect(await listUserDir({ trusted, segments: ["alice", "dir"] })).toMatchObject({ uid: USER, names: ["ok.json"] });
  });

  it("refuses a FIFO at once instead of blocking in open()", async () => {
    const fifo = path.join(home, "dir", "fifo.json");
    execFileSync("mkfifo", [fifo]);
    await lchown(fifo, USER, USER);
    expect(await problemOf(readUserFile(at("dir", "fifo.json")))).toEqual({
      problem: "not-regular",
      message: `${fifo}: a FIFO, not a regular file: ignored`,
    });
  });

  it("does not follow a link to a root-only file, and never quotes its content", async () => {
    const link = path.join(home, "dir", "link.json");
    await symlink(secretFile, link);
    await lchown(link, USER, USER);
    const refused = await problemOf(readUserFile(at("dir", "link.json")));
    expect(refused.problem).toBe("symlink");
    expect(refused.message).not.toContain(SECRET);
  });

  it("does not follow a directory the user replaced with a link", async () => {
    const outside = path.join(trusted, "outside");
    await mkdir(outside, { recursive: true });
    await writeFile(path.join(outside, "x.json"), SECRET);
    const link = path.join(home, "swapped");
    await symlink(outside, link);
    await lchown(link, USER, USER);
    expect((await problemOf(readUserFile(at("swapped", "x.json")))).problem).toBe("symlink");
    expect((await problemOf(listUserDir({ trusted, segments: ["alice", "swapped"] }))).problem).toBe("symlink");
  });

  it("refuses a file or directory owned by another user", async () => {
    const file = path.join(home, "dir", "theirs.json");
    await writeFile(file, "{}");
    await chown(file, OTHER, OTHER);
    expect(await problemOf(readUserFile(at("dir", "theirs.json")))).toEqual({
      problem: "wrong-owner",
      message: `${file}: owned by uid ${OTHER}, not uid ${USER} or root: ignored`,
    });
    const dir = path.join(home, "foreign");
    await mkdir(path.join(dir), { recursive: true });
    await writeFile(path.join(dir, "f.json"), "{}");
    await chown(dir, OTHER, OTHER);
    expect((await problemOf(readUserFile(at("foreign", "f.json")))).problem).toBe("wrong-owner");
  });

  it("refuses a 1 GB sparse file by its size, without reading it", async () => {
    const file = path.join(home, "dir", "huge.json");
    await writeFile(file, "");
    await truncate(file, 1024 ** 3);
    await chown(file, USER, USER);
    const refused = await problemOf(readUserFile(at("dir", "huge.json")));
    expect(refused).toEqual({
      problem: "too-large",
      message: `${file}: 1073741824 bytes, more than the 1024 a file of this kind may have`,
    });
  });

  it("follows a home that is a link only when root made it", async () => {
    await writeFile(path.join(home, "dir", "rootlinked.json"), "{}");
    await symlink(home, path.join(trusted, "alice-by-root"));
    expect(
      (
        await readUserFile({ trusted, segments: ["alice-by-root", "dir", "rootlinked.json"], maxBytes: 64 })
      ).data.toString(),
    ).toBe("{}");

    const userLink = path.join(trusted, "mallory");
    await symlink("/root", userLink);
    await lchown(userLink, USER, USER);
    expect(await problemOf(listUserDir({ trusted, segments: ["mallory"] }))).toEqual({
      problem: "symlink",
      message: `${userLink}: a symbolic link owned by uid ${USER}, not root: not followed`,
    });
  });

  it("lists a directory and reads the files it selects in the same walk, each checked like readUserFile", async () => {
    const listing = await listUserDir({
      trusted,
      segments: ["alice", "dir"],
      read: { names: (name) => name.endsWith(".json"), maxBytes: 64 },
    });
    const files = listing.files!;
    expect([...files.keys()].sort()).toEqual(listing.names.filter((name) => name.endsWith(".json")).sort());
    expect((files.get("ok.json") as { data: Buffer }).data.toString()).toBe('{"port": 1}');
    expect(files.get("fifo.json")).toMatchObject({ problem: "not-regular" });
    expect(files.get("link.json")).toMatchObject({ problem: "symlink" });
    expect(files.get("theirs.json")).toMatchObject({ problem: "wrong-owner" });
    // Thousands of planted names cost no more than maxFiles reads.
    const capped = await listUserDir({
      trusted,
      segments: ["alice", "dir"],
      read: { names: (name) => name.endsWith(".json"), maxBytes: 64, maxFiles: 2 },
    });
    expect(capped.files!.size).toBe(2);
    expect(capped.skipped).toBe(files.size - 2);
  });

  it("looks at no more than MAX_ENTRIES_SCANNED entries of a directory a user filled", async () => {
    const crowded = path.join(home, "crowded");
    await mkdir(crowded);
    await chown(crowded, USER, USER);
    for (let i = 0; i < MAX_ENTRIES_SCANNED + 10; i++) await writeFile(path.join(crowded, `jpserver-${i}.json`), "");
    const listing = await listUserDir({ trusted, segments: ["alice", "crowded"] });
    expect(listing.names).toHaveLength(MAX_ENTRIES_SCANNED);
    expect(listing.truncated).toBe(true);
  });

  it("says missing for an absent path, the ordinary case when scanning homes", async () => {
    expect((await problemOf(readUserFile(at("nope", "x.json")))).problem).toBe("missing");
  });

  it("reads only root's files where only root may write (owners: root)", async () => {
    const dir = path.join(trusted, "rootonly");
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, "lock"), "WHO=x");
    await writeFile(path.join(dir, "planted"), "WHO=y");
    await chown(path.join(dir, "planted"), USER, USER);
    expect(
      (await readUserFile({ trusted, segments: ["rootonly", "lock"], maxBytes: 64, owners: "root" })).data.toString(),
    ).toBe("WHO=x");
    expect(
      (await problemOf(readUserFile({ trusted, segments: ["rootonly", "planted"], maxBytes: 64, owners: "root" })))
        .message,
    ).toBe(`${path.join(dir, "planted")}: owned by uid ${USER}, not root: ignored`);
  });

  it("keeps the file open only while reading: no descriptor is left behind", async () => {
    const before = (await import("node:fs")).readdirSync("/proc/self/fd").length;
    for (let i = 0; i < 50; i++) await readUserFile(at("dir", "ok.json")).catch(() => undefined);
    for (let i = 0; i < 50; i++) await readUserFile(at("dir", "fifo.json")).catch(() => undefined);
    const after = (await import("node:fs")).readdirSync("/proc/self/fd").length;
    expect(after).toBe(before);
    // A file that is not there at all must not leak either.
    const handle = await open(path.join(home, "dir", "ok.json"), "r");
    await handle.close();
  });
});

describe("Lanes: a stuck read holds its lane, never the others' threads", () => {
  it("runs at most `size` at once, lets a waiter give up at its deadline, and counts what is stuck", async () => {
    const lanes = new Lanes(2);
    const never = new Promise<never>(() => undefined); // a read the kernel never answers
    void lanes.run("/stuck/1", undefined, () => never);
    void lanes.run("/stuck/2", undefined, () => never);
    const deadline = new AbortController();
    const waiting = lanes.run("/home/alice/x", deadline.signal, async () => "ran");
    deadline.abort();
    await expect(waiting).rejects.toMatchObject({
      problem: "timed-out",
      message: expect.stringContaining("/home/alice/x: gave up"),
    });
    expect(lanes.stuck(-1)).toBe(2);

    const free = new Lanes(1);
    let release!: () => void;
    const first = free.run("/a", undefined, () => new Promise<string>((resolve) => (release = () => resolve("first"))));
    const second = free.run("/b", undefined, async () => "second");
    release();
    expect(await Promise.all([first, second])).toEqual(["first", "second"]);
    expect(free.stuck(-1)).toBe(0);
  });
});
