import { isMap, isScalar, parseDocument, type Document, type YAMLMap } from "yaml";

/**
 * Netplan files that match an interface by MAC address (cloud-init writes them so, with a
 * set-name) bring no network up on a clone, whose NIC has a new MAC. They are rewritten to
 * match by name, with DHCP where nothing else is configured; everything else is kept,
 * comments included.
 */
export interface NetplanRewrite {
  changed: boolean;
  text: string;
  /** One line per interface rewritten, for the report. */
  changes: string[];
  /** Things seal does not fix but a clone would inherit (a fixed MAC assignment). */
  warnings: string[];
  /** MAC matches left in place because no safe rewrite exists; verification will flag them. */
  problems: string[];
}

/** Device types whose entries may match hardware by MAC. */
const PHYSICAL_TYPES = ["ethernets", "wifis", "modems"] as const;
const NAME_GLOB: Record<(typeof PHYSICAL_TYPES)[number], string> = { ethernets: "e*", wifis: "wl*", modems: "ww*" };
/** Kernel or predictable interface names, as opposed to free ids such as "id0" or "lan". */
const INTERFACE_NAME = /^(eth|en[a-z]|em|wl|ww|ib)[\w.-]*$/;

function parse(text: string): Document.Parsed {
  const document = parseDocument(text);
  if (document.errors.length > 0) throw new Error(document.errors[0]!.message.split("\n")[0]);
  return document;
}

function scalarString(value: unknown): string {
  return isScalar(value) ? String(value.value) : String(value);
}

/** Interfaces (type.id) whose match uses a MAC address. Throws on YAML netplan could not read either. */
export function macMatchedInterfaces(text: string): string[] {
  const document = parse(text);
  const found: string[] = [];
  for (const type of PHYSICAL_TYPES) {
    const devices = document.getIn(["network", type]);
    if (!isMap(devices)) continue;
    for (const pair of devices.items) {
      const match = isMap(pair.value) ? pair.value.get("match") : undefined;
      if (isMap(match) && match.has("macaddress")) found.push(`${type}.${scalarString(pair.key)}`);
    }
  }
  return found;
}

/** The indentation the file uses, so a rewrite keeps its look (cloud-init writes 4 spaces). */
function indentOf(text: string): number {
  const line = text.split("\n").find((l) => /^ +\S/.test(l) && !l.trimStart().startsWith("#"));
  return line ? line.length - line.trimStart().length : 2;
}

/** Ids other devices use as members (bridges, bonds) or links (vlans): they get no addressing of their own. */
function memberIds(document: Document.Parsed): Set<string> {
  const members = new Set<string>();
  for (const type of ["bridges", "bonds"]) {
    const devices = document.getIn(["network", type]);
    if (!isMap(devices)) continue;
    for (const pair of devices.items) {
      const interfaces = isMap(pair.value) ? pair.value.get("interfaces") : undefined;
      if (interfaces && typeof interfaces === "object" && "items" in interfaces) {
        for (const item of (interfaces as { items: unknown[] }).items) members.add(scalarString(item));
      }
    }
  }
  const vlans = document.getIn(["network", "vlans"]);
  if (isMap(vlans)) {
    for (const pair of vlans.items)
      if (isMap(pair.value) && pair.value.has("link")) members.add(scalarString(pair.value.get("link")));
  }
  return members;
}

/**
 * Pure. Rewrites only what it understands; an interface renamed by MAC to a name of the
 * builder's choosing (set-name: storage0) cannot be found on a clone without its MAC, so it is
 * left as it is and reported. Throws on YAML that does not parse (nothing is written then).
 */
export function rewriteMacMatches(text: string): NetplanRewrite {
  const document = parse(text);
  const changes: string[] = [];
  const warnings: string[] = [];
  const problems: string[] = [];
  const members = memberIds(document);
  for (const type of PHYSICAL_TYPES) {
    const devices = document.getIn(["network", type]);
    if (!isMap(devices)) continue;
    const macOnly = devices.items.filter((pair) => {
      const match = isMap(pair.value) ? pair.value.get("match") : undefined;
      return (
        isMap(match) &&
        match.has("macaddress") &&
        match.items.length === 1 &&
        !(pair.value as YAMLMap).has("set-name") &&
        !INTERFACE_NAME.test(scalarString(pair.key))
      );
    });
    for (const pair of devices.items) {
      const id = scalarString(pair.key);
      if (!isMap(pair.value)) continue;
      const device = pair.value as YAMLMap;
      const where = `${type}.${id}`;
      if (device.has("macaddress")) {
        warnings.push(
          `${where} sets macaddress ${scalarString(device.get("macaddress"))}: every clone would use that MAC; remove it by hand if it is not wanted`,
        );
      }
      const match = device.get("match");
      if (!isMap(match) || !match.has("macaddress")) continue;
      const mac = scalarString(match.get("macaddress"));
      const setName = device.has("set-name") ? scalarString(device.get("set-name")) : undefined;
      const otherCriteria = match.items.length > 1;
      let matchBy: string;
      if (setName !== undefined) {
        if (!INTERFACE_NAME.test(setName)) {
          problems.push(
            `${where} is renamed to ${setName} by its MAC ${mac}; on a clone nothing tells which interface that is: match it by its kernel name by hand`,
          );
          continue;
        }
        match.delete("macaddress");
        // set-name renames whatever the match finds; with the MAC gone the name itself is the match.
        device.delete("set-name");
        if (setName === id && !otherCriteria) {
          device.delete("match");
        } else {
          match.set("name", setName);
        }
        matchBy = `the name ${setName}`;
      } else if (otherCriteria) {
        match.delete("macaddress");
        matchBy = "its remaining match criteria";
      } else if (INTERFACE_NAME.test(id)) {
        device.delete("match");
        matchBy = `the name ${id}`;
      } else if (macOnly.length === 1) {
        match.delete("macaddress");
        match.set("name", NAME_GLOB[type]);
        matchBy = `names matching ${NAME_GLOB[type]} (the file does not say which interface it is)`;
      } else {
        problems.push(
          `${where} is one of ${macOnly.length} interfaces told apart only by MAC; match each by its kernel name by hand`,
        );
        continue;
      }
      const hasAddressing = ["dhcp4", "dhcp6", "addresses"].some((key) => device.has(key));
      const addDhcp = !hasAddressing && !members.has(id);
      if (addDhcp) device.set("dhcp4", true);
      changes.push(`${where}: matched by ${matchBy}, not by MAC ${mac}${addDhcp ? "; DHCP on" : ""}`);
    }
  }
  if (changes.length === 0) return { changed: false, text, changes, warnings, problems };
  return { changed: true, text: document.toString({ indent: indentOf(text) }), changes, warnings, problems };
}
