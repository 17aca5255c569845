// The policy part of the collector's config file (YAML):
//
//   annotationPrefix: workstation.aik8s.run/
//   defaults:
//     idle-timeout: 2h
//   profiles:
//     training: { idle-timeout: 8h, gpu-utilization-threshold: 5% }
//
// This is the `policy:` section of the collector's config file. Knob names are
// the annotation names without the prefix.

import { parse as parseYaml, YAMLParseError } from "yaml";
import { parseSchedule } from "@ws/protocol";
import {
  BUILTIN_DEFAULT_POLICY,
  DEFAULT_ANNOTATION_PREFIX,
  crossCheckPolicy,
  mergePolicy,
  parseKnobs,
} from "./policy.js";
import { closestName } from "./suggest.js";
import type { Policy, PolicyOverrides } from "./types.js";

export interface CollectorPolicyConfig {
  annotationPrefix: string;
  defaults: Policy;
  profiles: Record<string, PolicyOverrides>;
  /**
   * A profile's start schedule (`schedule: weekdays 08:45`, docs/coming-back.md): not a policy
   * knob (decide never reads it) but kept by profile name for the VMs that name the profile and
   * have no `schedule` annotation of their own. Validated here: a typo is a config error.
   */
  profileSchedules?: Record<string, string>;
}

export type ConfigResult = { ok: true; config: CollectorPolicyConfig } | { ok: false; errors: string[] };

const PROFILE_NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const PREFIX_SHAPE = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/$/;

export function defaultCollectorPolicyConfig(): CollectorPolicyConfig {
  return { annotationPrefix: DEFAULT_ANNOTATION_PREFIX, defaults: BUILTIN_DEFAULT_POLICY, profiles: {} };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

const SECTION_KEYS = ["annotationPrefix", "defaults", "profiles"];

/**
 * Parses the policy section's text; every problem is reported with its path, none is skipped.
 * `builtin` is what the section's defaults start from: the collector passes its top-level
 * reportInterval in it, so the rules between knobs (agent-lost-after at least twice the report
 * interval) judge the interval the config sets, not the built-in 15s.
 */
export function parseCollectorPolicyConfig(text: string, builtin: Policy = BUILTIN_DEFAULT_POLICY): ConfigResult {
  let document: unknown;
  try {
    document = parseYaml(text, { uniqueKeys: true });
  } catch (error) {
    if (error instanceof YAMLParseError) {
      const where = error.linePos?.[0] ? `line ${error.linePos[0].line}, column ${error.linePos[0].col}: ` : "";
      return { ok: false, errors: [`${where}${error.message.split("\n")[0]}`] };
    }
    throw error;
  }
  return parseCollectorPolicyDocument(document, builtin);
}

/** The same, for a section already parsed from YAML or JSON. */
export function parseCollectorPolicyDocument(
  document: unknown,
  builtin: Policy = BUILTIN_DEFAULT_POLICY,
): ConfigResult {
  if (document === null || document === undefined)
    return { ok: true, config: { ...defaultCollectorPolicyConfig(), defaults: builtin } };
  if (!isPlainObject(document))
    return { ok: false, errors: ["the policy config must be a mapping (key: value), not a list or a scalar"] };

  const errors: string[] = [];
  for (const key of Object.keys(document)) {
    if (SECTION_KEYS.includes(key)) continue;
    const suggestion = closestName(key, SECTION_KEYS);
    errors.push(
      `${key}: unknown key${suggestion ? `; did you mean "${suggestion}"?` : `; known: ${SECTION_KEYS.join(", ")}`}`,
    );
  }
  let annotationPrefix = DEFAULT_ANNOTATION_PREFIX;
  if (document.annotationPrefix !== undefined) {
    const prefix = document.annotationPrefix;
    if (typeof prefix !== "string" || !PREFIX_SHAPE.test(prefix)) {
      errors.push(
        `annotationPrefix: ${JSON.stringify(prefix)} must be a DNS subdomain followed by "/", such as ${DEFAULT_ANNOTATION_PREFIX}`,
      );
    } else {
      annotationPrefix = prefix;
    }
  }

  let defaults = builtin;
  if (document.defaults !== undefined && document.defaults !== null) {
    if (!isPlainObject(document.defaults)) {
      errors.push("defaults: must be a mapping of settings, such as idle-timeout: 2h");
    } else {
      const section = sectionKnobs("defaults", document.defaults, errors);
      defaults = mergePolicy(builtin, section);
      for (const error of crossCheckPolicy(defaults, (name) => `defaults.${name}`))
        errors.push(`${error.key}: ${error.message}`);
    }
  }

  const profiles: Record<string, PolicyOverrides> = {};
  const profileSchedules: Record<string, string> = {};
  if (document.profiles !== undefined && document.profiles !== null) {
    if (!isPlainObject(document.profiles)) {
      errors.push("profiles: must be a mapping from profile name to settings");
    } else {
      for (const [name, body] of Object.entries(document.profiles)) {
        if (!PROFILE_NAME.test(name)) {
          errors.push(
            `profiles.${name}: a profile name is lower-case letters, digits and dashes (it is written in an annotation)`,
          );
          continue;
        }
        if (body === null || body === undefined) {
          profiles[name] = {};
          continue;
        }
        if (!isPlainObject(body)) {
          errors.push(`profiles.${name}: must be a mapping of settings, such as idle-timeout: 8h`);
          continue;
        }
        const { schedule, ...knobs } = body;
        if (schedule !== undefined) {
          const line = typeof schedule === "string" ? schedule.trim() : "";
          // The zone only matters for a line that names none; the VM's zone applies when it is read.
          const parsed = line
            ? parseSchedule(line, "UTC")
            : { ok: false as const, error: "must be a schedule line such as weekdays 08:45" };
          if (parsed.ok) profileSchedules[name] = line;
          else errors.push(`profiles.${name}.schedule (${String(schedule)}): ${parsed.error}`);
        }
        const overrides = sectionKnobs(`profiles.${name}`, knobs, errors, ["schedule"]);
        profiles[name] = overrides;
        for (const error of crossCheckPolicy(mergePolicy(defaults, overrides), (knob) => `profiles.${name}.${knob}`)) {
          errors.push(`${error.key}: ${error.message}`);
        }
      }
    }
  }

  if (errors.length > 0) return { ok: false, errors };
  return {
    ok: true,
    config: {
      annotationPrefix,
      defaults,
      profiles,
      ...(Object.keys(profileSchedules).length > 0 ? { profileSchedules } : {}),
    },
  };
}

/** `alsoKnown`: keys the section takes besides the knobs (a profile's `schedule`), offered by did-you-mean. */
function sectionKnobs(
  path: string,
  section: Record<string, unknown>,
  errors: string[],
  alsoKnown: readonly string[] = [],
): PolicyOverrides {
  const entries = Object.entries(section);
  const profileEntry = entries.findIndex(([name]) => name === "profile");
  if (profileEntry >= 0) {
    errors.push(`${path}.profile: a profile is chosen per VM (annotation), not inside the config's ${path}`);
    entries.splice(profileEntry, 1);
  }
  const { overrides, errors: knobErrors } = parseKnobs(entries, "config", {
    keyLabel: (name) => `${path}.${name}`,
    alsoKnown,
  });
  for (const error of knobErrors) {
    errors.push(`${error.key}${error.value !== undefined ? ` (${error.value})` : ""}: ${error.message}`);
  }
  return overrides;
}
