// npm's semver → a Debian version: a pre-release must sort before its release, which in
// Debian takes "~" (1.0.0~rc.1 < 1.0.0), where semver has "-".

/** @returns {string | null} the Debian version, or null when `version` is not semver */
export function debianVersion(version) {
  const match = /^(\d+\.\d+\.\d+)(?:-([0-9A-Za-z.-]+))?(?:\+([0-9A-Za-z.-]+))?$/.exec(version);
  if (!match) return null;
  return match[1] + (match[2] ? `~${match[2].replace(/-/g, ".")}` : "") + (match[3] ? `+${match[3]}` : "");
}
