// What the HTTP side exposes to whoever reaches it, said once at start (docs/security.md, "The
// HTTP side"). Pure: the configuration in, the warning lines out; serve.ts logs them.

export interface ExposureInputs {
  mode: string;
  /** http.identity is configured: the pages are behind the site's login. */
  identity: boolean;
  /** http.metricsListen is configured: /metrics and the probes have their own port. */
  metricsListen: boolean;
}

export function httpExposureWarnings(inputs: ExposureInputs): string[] {
  const warnings: string[] = [];
  if (inputs.mode === "kubernetes" && !inputs.identity)
    warnings.push(
      "pages open: /, /vm/… and /api/vms show every VM and owner to whoever reaches http.listen; put them behind the site's auth proxy and set http.identity (docs/security.md)",
    );
  // /metrics asks for no identity (Prometheus has none to give): on the pages' port it hands every
  // VM's and owner's series to anyone who reaches that port, past the login (docs/security.md,
  // "/metrics on the pages port").
  if (!inputs.metricsListen && (inputs.identity || inputs.mode === "kubernetes"))
    warnings.push(
      "/metrics open on http.listen: it needs no identity and names every VM and owner; set http.metricsListen so it is served only on its own port (docs/security.md)",
    );
  return warnings;
}
