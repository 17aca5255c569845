// The gRPC port's certificate, reloaded when its files change. cert-manager renews the Secret a
// third of the way before expiry and the kubelet swaps the mounted files in place; a collector
// that read them once at start would serve the old certificate until it expired, and then every
// agent's next handshake would fail at once. Like the kubelet and Prometheus, the collector looks
// at the files again (a poll: Secret volumes change by a symlink swap that file watches miss) and
// hands grpc-js the new pair; grpc-js calls setSecureContext on its TLS server, so new connections
// get the new certificate and connections already open keep theirs.
import { createSecureContext } from "node:tls";
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { errorMessage, type Logger } from "@ws/protocol";

export interface CertificatePair {
  readonly cert: Buffer;
  readonly key: Buffer;
}

/** The certificate's notAfter in ms since the epoch: the first (leaf) certificate of a PEM chain. Throws on a file that holds none. */
export function certificateExpiryMs(pem: Buffer): number {
  return Date.parse(new X509Certificate(pem).validTo);
}

/** Whether two reads of the files are the same pair (then nothing is swapped). */
export function samePair(a: CertificatePair, b: CertificatePair): boolean {
  return a.cert.equals(b.cert) && a.key.equals(b.key);
}

/**
 * Why a pair cannot be served (a key that does not match the certificate, a file half written
 * while the Secret was updated), or undefined when it can. Node's own TLS context decides.
 */
export function pairProblem(pair: CertificatePair): string | undefined {
  try {
    createSecureContext({ cert: pair.cert, key: pair.key });
    certificateExpiryMs(pair.cert);
    return undefined;
  } catch (error) {
    return errorMessage(error);
  }
}

export interface CertificateFiles {
  certFile: string;
  keyFile: string;
}

const readPair = (files: CertificateFiles): CertificatePair => ({
  cert: readFileSync(files.certFile),
  key: readFileSync(files.keyFile),
});

/**
 * grpc-js server credentials whose certificate follows its files. grpc-js's own secure
 * credentials take their context once; this subclass uses the update path grpc-js gives its
 * certificate providers (updateSecureContextOptions: every TLS server built from these
 * credentials, the connection injector's too, gets setSecureContext).
 */
export class ReloadingServerCredentials extends grpc.ServerCredentials {
  private served: CertificatePair;
  private servedExpiryMs: number;
  private timer: NodeJS.Timeout | undefined;

  /** Reads the pair now; a pair that cannot be served fails the start, as a wrong path does. */
  static fromFiles(files: CertificateFiles, log: Logger): ReloadingServerCredentials {
    const pair = readPair(files);
    const problem = pairProblem(pair);
    if (problem) throw new Error(`grpc.certFile/keyFile (${files.certFile}, ${files.keyFile}): ${problem}`);
    return new ReloadingServerCredentials(files, pair, log);
  }

  private constructor(
    private readonly files: CertificateFiles,
    pair: CertificatePair,
    private readonly log: Logger,
  ) {
    super({ requestCert: false }, { cert: [pair.cert], key: [pair.key] });
    this.served = pair;
    this.servedExpiryMs = certificateExpiryMs(pair.cert);
  }

  /** When the certificate new connections get expires (ms since the epoch). */
  get expiryMs(): number {
    return this.servedExpiryMs;
  }

  /**
   * Reads the files again; a changed pair that can be served replaces the served one for new
   * connections. A pair that cannot (cert and key from two renewals, mid-update) is left for the
   * next look and the served one stays, so a rotation never leaves the port without a certificate.
   */
  reload(): "unchanged" | "reloaded" | "kept" {
    let pair: CertificatePair;
    try {
      pair = readPair(this.files);
    } catch (error) {
      this.log(
        "warn",
        `gRPC certificate files unreadable; still serving the previous certificate: ${errorMessage(error)}`,
      );
      return "kept";
    }
    if (samePair(pair, this.served)) return "unchanged";
    const problem = pairProblem(pair);
    if (problem) {
      this.log(
        "warn",
        `gRPC certificate files changed but cannot be served yet; still serving the previous one: ${problem}`,
        {
          certFile: this.files.certFile,
        },
      );
      return "kept";
    }
    this.served = pair;
    this.servedExpiryMs = certificateExpiryMs(pair.cert);
    this.updateSecureContextOptions({ cert: [pair.cert], key: [pair.key] });
    this.log("info", "gRPC certificate reloaded; new agent connections get it", {
      certFile: this.files.certFile,
      expires: new Date(this.servedExpiryMs).toISOString(),
    });
    return "reloaded";
  }

  /** Looks at the files every intervalMs until stop(). */
  watch(intervalMs: number): void {
    this.stop();
    this.timer = setInterval(() => this.reload(), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  override _equals(other: grpc.ServerCredentials): boolean {
    return other === this;
  }
}
