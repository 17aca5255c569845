// Debian's Chromium, headless, for the tests that look at the pages as a person would. One
// profile directory per browser, removed when it closes.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { type BrowserContext, chromium } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";

export interface Chromium {
  browser: BrowserContext;
  /** Closes the browser and removes its profile. */
  close(): Promise<void>;
}

/** Fails with what to install when Debian's chromium is missing. */
export function requireChromium(): void {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: install Debian's chromium (scripts/install-test-deps.sh does)`);
}

/** A headless Chromium with a fresh profile (no sync, updates or background traffic). */
export async function openChromium(viewport = { width: 1280, height: 900 }): Promise<Chromium> {
  requireChromium();
  const profile = mkdtempSync(path.join(os.tmpdir(), "ws-chromium-"));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
  return {
    browser,
    async close() {
      await browser.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
