import { mkdtemp, rename, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { defaultRoots, type Roots } from "../src/roots.js";
import { createUsersCache } from "../src/users.js";

const ALICE = "alice:x:1001:1001:Alice:/home/alice:/bin/bash\n";
const BOB = "bob:x:1002:1002:Bob:/home/bob:/bin/bash\n";

describe("createUsersCache", () => {
  let dir: string;
  let roots: Roots;
  const passwd = () => path.join(dir, "passwd");

  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "ws18-users-"));
    roots = { ...defaultRoots, etc: dir };
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("reads passwd once and keeps the same table while the file is unchanged", async () => {
    await writeFile(passwd(), ALICE);
    const cache = createUsersCache(roots);
    const first = cache.current();
    expect(first.byName("alice")?.uid).toBe(1001);
    expect(cache.current()).toBe(first);
  });

  it("re-reads when the file is replaced, as useradd does", async () => {
    await writeFile(passwd(), ALICE);
    const cache = createUsersCache(roots);
    expect(cache.current().byUid(1002)).toBeUndefined();
    const next = path.join(dir, "passwd+");
    await writeFile(next, ALICE + BOB);
    await rename(next, passwd());
    expect(cache.current().byUid(1002)?.name).toBe("bob");
  });

  it("re-reads when the file is rewritten in place with the same size", async () => {
    await writeFile(passwd(), ALICE);
    const cache = createUsersCache(roots);
    expect(cache.current().byName("alice")?.home).toBe("/home/alice");
    await writeFile(passwd(), ALICE.replace("/home/alice", "/home/alicf"));
    // Same size, and a write within the same timestamp tick: move mtime so the change is visible.
    const later = new Date(Date.now() + 5_000);
    await utimes(passwd(), later, later);
    expect(cache.current().byName("alice")?.home).toBe("/home/alicf");
  });

  it("gives an empty table while passwd is missing and reads it once it appears", async () => {
    const cache = createUsersCache(roots);
    expect(cache.current().all()).toEqual([]);
    await writeFile(passwd(), BOB);
    expect(cache.current().byName("bob")?.uid).toBe(1002);
  });
});
