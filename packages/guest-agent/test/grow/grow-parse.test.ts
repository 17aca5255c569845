// Pure parsers of grow, on output captured from the real tools (fixtures/grow/capture.sh).
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parseBtrfsShow } from "../../src/grow/btrfs.js";
import { parseEffectiveCapabilities } from "../../src/grow/capabilities.js";
import { parseDumpe2fsSize, parseXfsInfoSize } from "../../src/grow/fs-size.js";
import { parseGrowpartOutput } from "../../src/grow/growpart.js";
import { parseLvsJson, parsePvsJson, parseVgsJson, physicalVolumeHasRoom } from "../../src/grow/lvm.js";
import { mountContaining, parseMountInfo } from "../../src/grow/mountinfo.js";
import { isExtendedPartition, parseSfdiskJson } from "../../src/grow/partition-table.js";

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "../fixtures/grow");
const fixture = (name: string) => readFileSync(path.join(fixtures, name), "utf8");

describe("mountinfo", () => {
  const entries = parseMountInfo(fixture("mountinfo-loops.txt"));

  it("reads device numbers, mount points, types and sources", () => {
    expect(entries).toEqual([
      expect.objectContaining({
        major: 259,
        minor: 1,
        mountPoint: "/tmp/ws-grow/m-ext4",
        fsType: "ext4",
        source: "/dev/loop0p2",
        root: "/",
      }),
      expect.objectContaining({
        major: 259,
        minor: 2,
        mountPoint: "/tmp/ws-grow/m-xfs",
        fsType: "xfs",
        source: "/dev/loop1p1",
      }),
      // btrfs shows an anonymous device number: the source names the device.
      expect.objectContaining({
        major: 0,
        minor: 40,
        mountPoint: "/tmp/ws-grow/m-btrfs",
        fsType: "btrfs",
        source: "/dev/loop1p2",
      }),
    ]);
  });

  it("unescapes spaces and skips lines it cannot read", () => {
    const parsed = parseMountInfo(
      "garbage\n61 1 8:1 / /mnt/my\\040disk rw - ext4 /dev/sda1 rw\n62 1 x:y / /x rw - ext4 /dev/sdb rw\n",
    );
    expect(parsed).toHaveLength(1);
    expect(parsed[0]!.mountPoint).toBe("/mnt/my disk");
  });

  it("finds the mount holding a path: longest mount point, the later of two on one path", () => {
    const table = parseMountInfo(
      [
        "1 0 254:1 / / rw - ext4 /dev/vda1 rw",
        "2 1 254:2 / /home rw - xfs /dev/vda2 rw",
        "3 1 254:3 / /home rw - xfs /dev/vdb rw",
        "4 1 0:5 / /homework rw - tmpfs tmpfs rw",
      ].join("\n"),
    );
    expect(mountContaining(table, "/home/alice")!.source).toBe("/dev/vdb");
    expect(mountContaining(table, "/homework")!.fsType).toBe("tmpfs");
    expect(mountContaining(table, "/var/lib")!.source).toBe("/dev/vda1");
    expect(mountContaining(table, "/")!.source).toBe("/dev/vda1");
  });
});

describe("sfdisk --json", () => {
  it("reads a GPT table in bytes", () => {
    const table = parseSfdiskJson(fixture("sfdisk-gpt.json"));
    expect(table.label).toBe("gpt");
    expect(table.sectorSize).toBe(512);
    expect(table.partitions.map((p) => [p.number, p.startBytes, p.sizeBytes])).toEqual([
      [1, 2048 * 512, 16384 * 512],
      [2, 18432 * 512, 110592 * 512],
    ]);
  });

  it("reads an MBR table and knows its extended partition", () => {
    const table = parseSfdiskJson(fixture("sfdisk-dos-extended.json"));
    expect(table.label).toBe("dos");
    expect(table.partitions.map((p) => [p.node, p.number, isExtendedPartition(table, p)])).toEqual([
      ["/dev/vda1", 1, false],
      ["/dev/vda2", 2, true],
      ["/dev/vda5", 5, false],
    ]);
  });

  it("says clearly what is wrong with bad input", () => {
    expect(() => parseSfdiskJson("sfdisk: cannot open /dev/vdz")).toThrow(/not JSON/);
    expect(() => parseSfdiskJson("{}")).toThrow(/no partitiontable/);
    expect(() => parseSfdiskJson('{"partitiontable":{"label":"gpt","partitions":[{"node":"/dev/vda1"}]}}')).toThrow(
      /unreadable partition entry/,
    );
  });
});

describe("growpart output", () => {
  it("CHANGED is a change, with the old and new sizes", () => {
    expect(parseGrowpartOutput(fixture("growpart-changed.txt"), 0)).toEqual({
      outcome: "changed",
      oldSizeSectors: 110592,
      newSizeSectors: 243679,
      line: fixture("growpart-changed.txt").trim(),
    });
  });

  it("NOCHANGE (exit 1) is success with nothing done", () => {
    expect(parseGrowpartOutput(fixture("growpart-nochange.txt"), 1)).toMatchObject({ outcome: "nochange" });
  });

  it("FAILED is a failure whatever the exit status, and exit 1 without NOCHANGE is too", () => {
    expect(parseGrowpartOutput(fixture("growpart-failed.txt"), 2)).toEqual({
      outcome: "failed",
      line: fixture("growpart-failed.txt").trim(),
    });
    expect(parseGrowpartOutput(`${fixture("growpart-changed.txt")}FAILED: disk went away\n`, 0)).toMatchObject({
      outcome: "failed",
    });
    expect(parseGrowpartOutput("growpart: command not understood\n", 1)).toMatchObject({
      outcome: "failed",
      line: expect.stringMatching(/exited 1 without a verdict/),
    });
  });
});

describe("filesystem sizes", () => {
  it("dumpe2fs -h: block count × block size", () => {
    // The captured 54 MiB ext4: 55296 blocks of 1 KiB.
    expect(parseDumpe2fsSize(fixture("dumpe2fs-h.txt"))).toBe(55296 * 1024);
    expect(() => parseDumpe2fsSize("dumpe2fs: Bad magic number in super-block")).toThrow(/Block count/);
  });

  it("xfs_info: data bsize × blocks", () => {
    expect(parseXfsInfoSize(fixture("xfs_info.txt"))).toBe(4096 * 81920);
    expect(() => parseXfsInfoSize("xfs_info: /mnt is not a mounted XFS filesystem")).toThrow(/data section/);
  });

  it("btrfs filesystem show --raw: devices with ids and sizes", () => {
    expect(parseBtrfsShow(fixture("btrfs-show.txt"))).toEqual([
      { devid: 1, sizeBytes: 396361728, path: "/dev/loop1p2" },
    ]);
    expect(parseBtrfsShow("Label: none  uuid: x\n\t*** Some devices missing\n")).toEqual([]);
  });
});

describe("LVM reports", () => {
  it("lvs --segments: one volume with its segment types and its group's free space", () => {
    expect(parseLvsJson(fixture("lvs-segments.json"))).toEqual([
      {
        vg: "wsfixturevg",
        lv: "root",
        dmPath: "/dev/mapper/wsfixturevg-root",
        sizeBytes: 25165824,
        segmentTypes: ["linear"],
        vgFreeBytes: 29360128,
        extentBytes: 4194304,
      },
    ]);
  });

  it("folds several segments of one volume", () => {
    const text = JSON.stringify({
      report: [
        {
          seg: [
            {
              lv_name: "root",
              vg_name: "vg",
              lv_dm_path: "/dev/mapper/vg-root",
              lv_size: "8388608",
              segtype: "linear",
              vg_free: "0",
              vg_extent_size: "4194304",
            },
            {
              lv_name: "root",
              vg_name: "vg",
              lv_dm_path: "/dev/mapper/vg-root",
              lv_size: "8388608",
              segtype: "raid1",
              vg_free: "0",
              vg_extent_size: "4194304",
            },
          ],
        },
      ],
    });
    expect(parseLvsJson(text)[0]!.segmentTypes).toEqual(["linear", "raid1"]);
  });

  it("pvs and vgs", () => {
    const [pv] = parsePvsJson(fixture("pvs.json"));
    expect(pv).toEqual({
      path: "/dev/vda2",
      vg: "wsfixturevg",
      sizeBytes: 54525952,
      deviceBytes: 56623104,
      peStartBytes: 1048576,
    });
    // 56623104 - 1 MiB - 54525952 = 1 MiB: less than one 4 MiB extent, nothing to resize.
    expect(physicalVolumeHasRoom(pv!, 4194304)).toBe(false);
    expect(physicalVolumeHasRoom({ ...pv!, deviceBytes: pv!.deviceBytes + 64 * 1024 * 1024 }, 4194304)).toBe(true);
    expect(parseVgsJson(fixture("vgs.json"))).toEqual([
      { vg: "wsfixturevg", freeBytes: 29360128, extentBytes: 4194304 },
    ]);
  });

  it("rejects reports without sizes in bytes", () => {
    expect(() => parsePvsJson('{"report":[{"pv":[{"pv_name":"/dev/vda2","pv_size":"52.00m"}]}]}')).toThrow(
      /--units b --nosuffix/,
    );
    expect(() => parseLvsJson("  WARNING: nothing")).toThrow(/not JSON/);
  });
});

describe("capabilities", () => {
  it("reads CapEff: this sandbox's root lacks CAP_SYS_RESOURCE", () => {
    const status = fixture("proc-status-sandbox.txt");
    const capEff = /^CapEff:\s*(\w+)/m.exec(status)![1]!;
    expect(parseEffectiveCapabilities(status)).toEqual({
      sysAdmin: ((BigInt(`0x${capEff}`) >> 21n) & 1n) === 1n,
      sysResource: ((BigInt(`0x${capEff}`) >> 24n) & 1n) === 1n,
    });
  });

  it("full root has both; no CapEff line grants nothing", () => {
    expect(parseEffectiveCapabilities("CapEff:\t000001ffffffffff\n")).toEqual({ sysAdmin: true, sysResource: true });
    expect(parseEffectiveCapabilities("CapEff:\t000001fffeffffff\n")).toEqual({ sysAdmin: true, sysResource: false });
    expect(parseEffectiveCapabilities("Name:\tnode\n")).toEqual({ sysAdmin: false, sysResource: false });
  });
});
