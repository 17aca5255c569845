// The `start:` section of the collector's config file (docs/coming-back.md), and the per-VM
// annotations that name a workstation's entry point. Pure: values in, a config or problems out.
import { DurationError, isJsonObject, parseDuration, validTimeZone } from "@ws/protocol";
import { ENTRY_SERVICES, type EntryService } from "./readiness.js";
import { DEFAULT_START_LINK_TTL_SECONDS } from "../../links/start-token.js";

export interface EntryConfig {
  /** URL template of the workstation's own entry point: {namespace}, {name}, {owner}. "" = none. */
  entryUrl: string;
  entryService: EntryService;
}

export interface StartConfig extends EntryConfig {
  /** How long a start link works (it works again and again until then, or until the key rotates). */
  linkTtlSeconds: number;
  /** Per profile: the entry point of that profile's VMs. */
  profiles: Record<string, Partial<EntryConfig>>;
  /**
   * Where a standby replica forwards a POST (start, keep running) so the leader acts on it:
   * normally the collector's Service, which selects the leader's pod. "" = the standby answers
   * 503 and asks the browser to retry.
   */
  leaderUrl: string;
  /**
   * The fixed address's listener (host:port): where the gateway sends a stopped workstation's
   * 502/503 (nginx `error_page`, ingress-nginx `custom-http-errors` + `default-backend`) and the
   * address's `/.ws/start` POST. "" = none.
   */
  wakeListen: string;
  /** The time zone of a VM's schedule that names none, on a VM without a `time-zone` annotation (IANA). */
  timeZone: string;
  /** How often the collector looks for schedule starts that fell due (docs/coming-back.md). */
  schedulePassSeconds: number;
  /**
   * The port the collector probes on a starting VM's address (an SSH banner there is Ready, before
   * the agent reports it), for entry services sshd satisfies. 0 = no probe: the agent's word only.
   */
  probePort: number;
}

/** Per-VM annotations (after the policy prefix). */
export const ENTRY_URL_ANNOTATION = "entry-url";
export const ENTRY_SERVICE_ANNOTATION = "entry-service";

export const DEFAULT_START: StartConfig = Object.freeze({
  linkTtlSeconds: DEFAULT_START_LINK_TTL_SECONDS,
  entryUrl: "",
  entryService: "any",
  profiles: {},
  leaderUrl: "",
  wakeListen: "",
  timeZone: "UTC",
  schedulePassSeconds: 30,
  probePort: 22,
}) as StartConfig;

/** host:port or [ipv6]:port, as every listen setting is written. */
export const isHostPort = (address: string): boolean => /^[\w.-]*:\d{1,5}$|^\[[0-9a-f:.]*\]:\d{1,5}$/i.test(address);

const KEYS = [
  "linkTtl",
  "entryUrl",
  "entryService",
  "profiles",
  "leaderUrl",
  "wakeListen",
  "timeZone",
  "schedulePass",
  "probePort",
];

/** An http(s) URL template; placeholders are checked by expanding them with sample values. */
function urlTemplate(value: unknown, label: string, problems: string[]): string | undefined {
  if (typeof value !== "string" || value === "") {
    problems.push(`${label}: expected a URL template such as "https://{name}.ws.example.com/"`);
    return undefined;
  }
  const unknown = [...value.matchAll(/\{([^}]*)\}/g)]
    .map((m) => m[1])
    .filter((p) => !["namespace", "name", "owner"].includes(p!));
  if (unknown.length) {
    problems.push(`${label}: unknown placeholder {${unknown[0]}} (known: {namespace}, {name}, {owner})`);
    return undefined;
  }
  const sample = expandEntryUrl(value, { namespace: "ns", name: "vm" }, "owner");
  if (!sample) {
    problems.push(`${label}: "${value.slice(0, 200)}" is not an http(s) URL`);
    return undefined;
  }
  return value;
}

function entryService(value: unknown, label: string, problems: string[]): EntryService | undefined {
  if (typeof value === "string" && (ENTRY_SERVICES as readonly string[]).includes(value)) return value as EntryService;
  problems.push(`${label}: expected one of ${ENTRY_SERVICES.join(", ")}`);
  return undefined;
}

export function parseStartConfig(raw: unknown, problems: string[], label = "start"): StartConfig {
  const config: StartConfig = { ...DEFAULT_START, profiles: {} };
  if (raw == null) return config;
  if (!isJsonObject(raw)) {
    problems.push(`${label}: must be a mapping`);
    return config;
  }
  for (const key of Object.keys(raw))
    if (!KEYS.includes(key)) problems.push(`${label}: unknown setting "${key}" (known: ${KEYS.join(", ")})`);
  if (raw.linkTtl != null) {
    try {
      const seconds = parseDuration(String(raw.linkTtl), { allowBareSeconds: true });
      if (seconds < 60 || seconds > 366 * 24 * 3600) problems.push(`${label}.linkTtl: must be between 1m and 366d`);
      else config.linkTtlSeconds = seconds;
    } catch (error) {
      problems.push(`${label}.linkTtl: ${error instanceof DurationError ? error.message : String(error)}`);
    }
  }
  if (raw.entryUrl != null) config.entryUrl = urlTemplate(raw.entryUrl, `${label}.entryUrl`, problems) ?? "";
  if (raw.entryService != null)
    config.entryService = entryService(raw.entryService, `${label}.entryService`, problems) ?? "any";
  if (raw.leaderUrl != null) {
    const url = typeof raw.leaderUrl === "string" ? raw.leaderUrl.replace(/\/+$/, "") : "";
    if (!/^https?:\/\/[^/\s]+$/.test(url)) problems.push(`${label}.leaderUrl: expected http(s)://host:port`);
    else config.leaderUrl = url;
  }
  if (raw.wakeListen != null) {
    const address = String(raw.wakeListen);
    if (!isHostPort(address)) problems.push(`${label}.wakeListen: "${address.slice(0, 100)}" must be host:port`);
    else config.wakeListen = address;
  }
  if (raw.timeZone != null) {
    const zone = String(raw.timeZone);
    if (!validTimeZone(zone))
      problems.push(`${label}.timeZone: "${zone.slice(0, 100)}" is not an IANA time zone (such as Europe/Berlin)`);
    else config.timeZone = zone;
  }
  if (raw.schedulePass != null) {
    try {
      const seconds = parseDuration(String(raw.schedulePass), { allowBareSeconds: true });
      if (seconds < 1 || seconds > 300) problems.push(`${label}.schedulePass: must be between 1s and 5m`);
      else config.schedulePassSeconds = seconds;
    } catch (error) {
      problems.push(`${label}.schedulePass: ${error instanceof DurationError ? error.message : String(error)}`);
    }
  }
  if (raw.probePort != null) {
    const port = raw.probePort;
    if (typeof port !== "number" || !Number.isInteger(port) || port < 0 || port > 65535)
      problems.push(`${label}.probePort: expected a port (1-65535), or 0 for no probe`);
    else config.probePort = port;
  }
  if (raw.profiles != null) {
    if (!isJsonObject(raw.profiles))
      problems.push(`${label}.profiles: must map a profile name to entryUrl/entryService`);
    else
      for (const [name, value] of Object.entries(raw.profiles)) {
        const entry: Partial<EntryConfig> = {};
        const where = `${label}.profiles.${name}`;
        if (!isJsonObject(value)) {
          problems.push(`${where}: must be a mapping`);
          continue;
        }
        for (const key of Object.keys(value))
          if (key !== "entryUrl" && key !== "entryService") problems.push(`${where}: unknown setting "${key}"`);
        if (value.entryUrl != null) {
          const url = urlTemplate(value.entryUrl, `${where}.entryUrl`, problems);
          if (url) entry.entryUrl = url;
        }
        if (value.entryService != null) {
          const service = entryService(value.entryService, `${where}.entryService`, problems);
          if (service) entry.entryService = service;
        }
        config.profiles[name] = entry;
      }
  }
  return config;
}

/** The URL with its placeholders filled in (each value URL-encoded), or undefined when it is not http(s). */
export function expandEntryUrl(
  template: string,
  vm: { namespace: string; name: string },
  owner: string,
): string | undefined {
  const url = template
    .replaceAll("{namespace}", encodeURIComponent(vm.namespace))
    .replaceAll("{name}", encodeURIComponent(vm.name))
    .replaceAll("{owner}", encodeURIComponent(owner));
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.toString() : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The VM's entry point: its annotations first, then its profile's, then the defaults. A bad
 * annotation is named in `problem` and the next source applies.
 */
export function entryFor(
  config: StartConfig,
  vm: { namespace: string; name: string },
  meta: { annotations: Record<string, string>; profile: string; owner: string },
  prefix: string,
): { url?: string; service: EntryService; problem?: string } {
  const profile = config.profiles[meta.profile] ?? {};
  const problems: string[] = [];
  let service = profile.entryService ?? config.entryService;
  const serviceAnnotation = meta.annotations[`${prefix}${ENTRY_SERVICE_ANNOTATION}`];
  if (serviceAnnotation !== undefined) {
    const parsed = entryService(serviceAnnotation, `${prefix}${ENTRY_SERVICE_ANNOTATION}`, problems);
    if (parsed) service = parsed;
  }
  let template = profile.entryUrl ?? config.entryUrl;
  const urlAnnotation = meta.annotations[`${prefix}${ENTRY_URL_ANNOTATION}`];
  if (urlAnnotation !== undefined) {
    const parsed = urlTemplate(urlAnnotation, `${prefix}${ENTRY_URL_ANNOTATION}`, problems);
    if (parsed) template = parsed;
  }
  const url = template ? expandEntryUrl(template, vm, meta.owner) : undefined;
  return { ...(url ? { url } : {}), service, ...(problems.length ? { problem: problems.join("; ") } : {}) };
}
