import { errorMessage } from "@ws/protocol";
/**
 * LVM, read from `lvs`/`pvs`/`vgs --reportformat json --units b --nosuffix`. Pure parsers:
 * the commands are run by facts.ts with the field lists below.
 */
export const LVS_FIELDS = "lv_name,vg_name,lv_dm_path,lv_size,segtype,vg_free,vg_extent_size";
export const PVS_FIELDS = "pv_name,vg_name,pv_size,dev_size,pe_start";
export const VGS_FIELDS = "vg_name,vg_free,vg_extent_size";

export interface LogicalVolume {
  vg: string;
  lv: string;
  /** /dev/mapper/<vg>-<lv>, how the mount's device-mapper node is matched. */
  dmPath: string;
  sizeBytes: number;
  /** One entry per segment (`lvs --segments`); growth is understood for linear ones only. */
  segmentTypes: string[];
  vgFreeBytes: number;
  extentBytes: number;
}

export interface PhysicalVolume {
  path: string;
  vg: string;
  sizeBytes: number;
  deviceBytes: number;
  peStartBytes: number;
}

export interface VolumeGroup {
  vg: string;
  freeBytes: number;
  extentBytes: number;
}

/** `lvs --segments` reports under "seg", plain lvs under "lv". */
type ReportKind = "lv" | "seg" | "pv" | "vg";

function reportRows(text: string, kinds: ReportKind[], command: string): Array<Record<string, string>> {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    throw new Error(`${command}: not JSON (${errorMessage(error)})`);
  }
  const reports = (document as { report?: unknown })?.report;
  if (!Array.isArray(reports)) throw new Error(`${command}: no "report" array`);
  const rows: Array<Record<string, string>> = [];
  for (const report of reports as Array<Record<string, unknown>>) {
    for (const kind of kinds) {
      const list = report?.[kind];
      if (Array.isArray(list)) rows.push(...(list as Array<Record<string, string>>));
    }
  }
  return rows;
}

function bytes(value: string | undefined, field: string, command: string): number {
  const number = Number(value);
  if (value === undefined || value === "" || !Number.isFinite(number)) {
    throw new Error(
      `${command}: field ${field} is not a number of bytes (${JSON.stringify(value)}); run with --units b --nosuffix`,
    );
  }
  return number;
}

/** Parses `lvs --segments` JSON; segments of one LV are folded into one entry. */
export function parseLvsJson(text: string): LogicalVolume[] {
  const byPath = new Map<string, LogicalVolume>();
  for (const row of reportRows(text, ["seg", "lv"], "lvs")) {
    const dmPath = row.lv_dm_path ?? "";
    const existing = byPath.get(dmPath);
    if (existing) {
      existing.segmentTypes.push(row.segtype ?? "");
      continue;
    }
    byPath.set(dmPath, {
      vg: row.vg_name ?? "",
      lv: row.lv_name ?? "",
      dmPath,
      sizeBytes: bytes(row.lv_size, "lv_size", "lvs"),
      segmentTypes: [row.segtype ?? ""],
      vgFreeBytes: bytes(row.vg_free, "vg_free", "lvs"),
      extentBytes: bytes(row.vg_extent_size, "vg_extent_size", "lvs"),
    });
  }
  return [...byPath.values()];
}

export function parsePvsJson(text: string): PhysicalVolume[] {
  return reportRows(text, ["pv"], "pvs").map((row) => ({
    path: row.pv_name ?? "",
    vg: row.vg_name ?? "",
    sizeBytes: bytes(row.pv_size, "pv_size", "pvs"),
    deviceBytes: bytes(row.dev_size, "dev_size", "pvs"),
    peStartBytes: bytes(row.pe_start, "pe_start", "pvs"),
  }));
}

export function parseVgsJson(text: string): VolumeGroup[] {
  return reportRows(text, ["vg"], "vgs").map((row) => ({
    vg: row.vg_name ?? "",
    freeBytes: bytes(row.vg_free, "vg_free", "vgs"),
    extentBytes: bytes(row.vg_extent_size, "vg_extent_size", "vgs"),
  }));
}

/** A PV is worth a pvresize when its device holds at least one more extent than the PV uses. */
export function physicalVolumeHasRoom(pv: PhysicalVolume, extentBytes: number): boolean {
  return pv.deviceBytes - pv.peStartBytes - pv.sizeBytes >= extentBytes;
}
