// The collector config's optional `prices:` section (docs/cost.md): what a core-hour, a GiB-hour
// of memory, a GPU-hour (by device name) and a GiB-month of disk (by StorageClass) cost the site.
// Without it the pages show resource-hours only. Pure: the section in, prices and problems out.
import { closestName, isJsonObject } from "@ws/protocol";

export interface Prices {
  /** What the figures are in: "EUR", "$", "credits" (shown beside every sum; never converted). */
  currency: string;
  cpuCoreHour: number;
  memoryGiBHour: number;
  /** Per GPU-hour, by the device name of the VM spec (`nvidia.com/A100-PCIE-40GB`); `default` for the rest. */
  gpuHour: Readonly<Record<string, number>>;
  /** Per GiB-month of a disk, by StorageClass; `default` for the rest. */
  diskGiBMonth: Readonly<Record<string, number>>;
}

const KEYS = ["currency", "cpuCoreHour", "memoryGiBHour", "gpuHour", "diskGiBMonth"] as const;
/**
 * The most one unit may cost: far above any cloud's list price (an 8-GPU node is about 100 an
 * hour), so a value past it is a typo (a monthly price where an hourly one belongs, cents as units).
 */
export const PRICE_LIMITS = { cpuCoreHour: 100, memoryGiBHour: 100, gpuHour: 1000, diskGiBMonth: 1000 } as const;
/** A device name as the VM spec writes it (`nvidia.com/A100-PCIE-40GB`), or a StorageClass name. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._/-]{0,252}$/;

/** The `prices:` section, or undefined when it is absent; each problem is pushed with `label` in front. */
export function parsePricesConfig(value: unknown, problems: string[], label: string): Prices | undefined {
  if (value == null) return undefined;
  if (!isJsonObject(value)) {
    problems.push(`${label} must be a mapping (currency, cpuCoreHour, memoryGiBHour, gpuHour, diskGiBMonth)`);
    return undefined;
  }
  for (const key of Object.keys(value)) {
    if ((KEYS as readonly string[]).includes(key)) continue;
    const suggestion = closestName(key, KEYS);
    problems.push(
      `${label}: unknown key "${key.slice(0, 60)}"${suggestion ? `; did you mean "${suggestion}"?` : `; known: ${KEYS.join(", ")}`}`,
    );
  }
  const price = (key: keyof typeof PRICE_LIMITS, raw: unknown, where: string): number => {
    const limit = PRICE_LIMITS[key];
    if (typeof raw === "number" && Number.isFinite(raw) && raw >= 0 && raw <= limit) return raw;
    const shown = JSON.stringify(raw)?.slice(0, 40);
    const why =
      typeof raw === "number" && raw > limit
        ? ` (more than ${limit} a unit is taken for a typo: a monthly price where an hourly one belongs, or cents)`
        : "";
    problems.push(`${label}.${where} must be a number from 0 to ${limit}, not ${shown}${why}`);
    return 0;
  };
  const byName = (key: "gpuHour" | "diskGiBMonth", what: string): Record<string, number> => {
    const raw = value[key];
    if (raw == null) return {};
    if (typeof raw === "number") return { default: price(key, raw, key) };
    if (!isJsonObject(raw)) {
      problems.push(`${label}.${key} must map ${what} (or default) to a price, or be one price for all`);
      return {};
    }
    const out: Record<string, number> = {};
    for (const [name, each] of Object.entries(raw)) {
      if (!NAME.test(name)) {
        problems.push(`${label}.${key}: "${name.slice(0, 60)}" is not ${what}`);
        continue;
      }
      out[name] = price(key, each, `${key}["${name}"]`);
    }
    return out;
  };
  const currency = value.currency ?? "";
  if (typeof currency !== "string" || currency.length > 12 || /[<>&"'\p{Cc}]/u.test(currency))
    problems.push(`${label}.currency must be a short name or symbol (EUR, $, credits), at most 12 characters`);
  return {
    currency: typeof currency === "string" && currency.length <= 12 ? currency : "",
    cpuCoreHour: value.cpuCoreHour == null ? 0 : price("cpuCoreHour", value.cpuCoreHour, "cpuCoreHour"),
    memoryGiBHour: value.memoryGiBHour == null ? 0 : price("memoryGiBHour", value.memoryGiBHour, "memoryGiBHour"),
    gpuHour: byName("gpuHour", "a GPU device name (nvidia.com/A100-PCIE-40GB)"),
    diskGiBMonth: byName("diskGiBMonth", "a StorageClass name"),
  };
}

/** The hourly price of one GPU of `device`: its own price, else `default`, else 0. */
export function gpuHourPrice(prices: Prices, device: string): number {
  return prices.gpuHour[device] ?? prices.gpuHour.default ?? 0;
}

/** The monthly price of one GiB on `storageClass`: its own price, else `default`, else 0. */
export function diskGiBMonthPrice(prices: Prices, storageClass: string): number {
  return prices.diskGiBMonth[storageClass] ?? prices.diskGiBMonth.default ?? 0;
}
