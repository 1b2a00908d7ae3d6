/**
 * A thin typed wrapper over `npm:dockerode` (docs/architecture.md "Platform choices"): the calls
 * marsh makes to a Docker engine over its Unix socket, with our own types
 * (dockerode ships none, and `@types/dockerode` describes 4.x and drags
 * Node 18's typings into the project's type check) and two errors callers
 * tell apart: the engine did not answer, or it answered with a failure.
 *
 * Needs `--allow-net=unix:<socket>`, read and write on the socket's path,
 * and unscoped `--allow-env` (docker-modem reads `DOCKER_*` and
 * `process.env` when it starts).
 *
 * @module
 */

import Docker from "dockerode";
import { Buffer } from "node:buffer";
import { Readable } from "node:stream";

/** How long a short call (ping, version, inspect) may take before the engine counts as unreachable. */
export const SHORT_CALL_MS = 5_000;

/** No engine answers on the socket (absent, refused, not permitted, or timed out). */
export class EngineUnreachableError extends Error {
  override name = "EngineUnreachableError";
  readonly socket: string;
  constructor(socket: string, detail: string, options?: ErrorOptions) {
    super(`no Docker engine answers at ${socket} (${detail})`, options);
    this.socket = socket;
  }
}

/** The engine answered a call with a failure. */
export class DockerApiError extends Error {
  override name = "DockerApiError";
  /** The HTTP status the engine answered with, when it did. */
  readonly statusCode: number | undefined;
  constructor(message: string, statusCode: number | undefined, options?: ErrorOptions) {
    super(message, options);
    this.statusCode = statusCode;
  }
}

/** The engine's version, from `GET /version`. */
export interface EngineVersion {
  readonly version: string;
  readonly apiVersion: string;
  readonly os: string;
  readonly arch: string;
}

/** An image, from `GET /images/{name}/json`. */
export interface ImageInfo {
  /** `sha256:…` */
  readonly id: string;
  readonly tags: readonly string[];
  readonly labels: Readonly<Record<string, string>>;
  readonly env: readonly string[];
  readonly created: string;
  readonly size: number;
  /** The root filesystem's layer digests. */
  readonly layers: readonly string[];
}

/** An image, from `GET /images/json`. */
export interface ImageSummary {
  readonly id: string;
  readonly tags: readonly string[];
  readonly labels: Readonly<Record<string, string>>;
}

/** What a Kit container is made of; the defaults are the confined ones. */
export interface ContainerSpec {
  readonly image: string;
  readonly cmd: readonly string[];
  readonly name?: string;
  /** `KEY=VALUE` entries. */
  readonly env?: readonly string[];
  /** `HOST:CONTAINER[:ro]` bind mounts. */
  readonly binds?: readonly string[];
  readonly labels?: Readonly<Record<string, string>>;
  /** `--init` (tini reaps and forwards signals). Default true. */
  readonly init?: boolean;
  /** Default `"none"`: no network at all (docs/architecture.md "Platform choices"). */
  readonly network?: "none" | "host" | "bridge";
  /** `UID[:GID]` or a name in the image's /etc/passwd. */
  readonly user?: string;
  readonly workingDir?: string;
}

/** A container, from `GET /containers/json`. */
export interface ContainerSummary {
  readonly id: string;
  readonly names: readonly string[];
  readonly image: string;
  /** `created`, `running`, `exited`, … */
  readonly state: string;
  readonly labels: Readonly<Record<string, string>>;
}

/** A container's output, split into its two streams. */
export interface ContainerOutput {
  readonly stdout: Uint8Array;
  readonly stderr: Uint8Array;
}

/** A finished `run`. */
export interface RunResult extends ContainerOutput {
  readonly code: number;
}

/** The subset of dockerode's surface used here, typed by us. */
interface DockerodeLike {
  ping(opts: { abortSignal?: AbortSignal }): Promise<unknown>;
  version(opts: { abortSignal?: AbortSignal }): Promise<Record<string, unknown>>;
  importImage(file: Readable, opts: Record<string, unknown>): Promise<Readable>;
  getImage(
    name: string,
  ): {
    inspect(opts: { abortSignal?: AbortSignal }): Promise<Record<string, unknown>>;
    tag(opts: { repo: string; tag: string }): Promise<unknown>;
    remove(opts: { noprune: boolean }): Promise<unknown>;
  };
  listImages(opts: Record<string, unknown>): Promise<Record<string, unknown>[]>;
  createContainer(opts: Record<string, unknown>): Promise<{ id: string }>;
  getContainer(id: string): ContainerLike;
  listContainers(opts: Record<string, unknown>): Promise<Record<string, unknown>[]>;
  modem: {
    followProgress(
      stream: Readable,
      done: (error: unknown, output: Record<string, unknown>[]) => void,
    ): void;
  };
}

interface ContainerLike {
  start(): Promise<unknown>;
  wait(): Promise<{ StatusCode: number; Error?: { Message?: string } | null }>;
  logs(opts: { stdout: boolean; stderr: boolean; follow: false }): Promise<Buffer>;
  remove(opts: { force: boolean; v: boolean }): Promise<unknown>;
}

const UNREACHABLE_CODES = new Set([
  "ENOENT",
  "ECONNREFUSED",
  "ECONNRESET",
  "EACCES",
  "EPERM",
  "ENOTSOCK",
  "EPIPE",
  "ETIMEDOUT",
]);

function asRecord(x: unknown): Record<string, unknown> {
  return typeof x === "object" && x !== null ? x as Record<string, unknown> : {};
}

function strings(x: unknown): string[] {
  return Array.isArray(x) ? x.filter((s): s is string => typeof s === "string") : [];
}

function labelsOf(x: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(asRecord(x))) if (typeof v === "string") out[k] = v;
  return out;
}

/**
 * Splits Docker's multiplexed stream (no TTY): frames of an 8-byte header
 * (stream 1 = stdout, 2 = stderr; big-endian length) and their payload.
 */
export function demux(bytes: Uint8Array): ContainerOutput {
  const out: Uint8Array[] = [];
  const err: Uint8Array[] = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let off = 0;
  while (off + 8 <= bytes.length) {
    const kind = bytes[off]!;
    const len = view.getUint32(off + 4);
    const payload = bytes.subarray(off + 8, Math.min(bytes.length, off + 8 + len));
    (kind === 2 ? err : out).push(payload);
    off += 8 + len;
  }
  const join = (parts: Uint8Array[]) => {
    const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      all.set(p, at);
      at += p.length;
    }
    return all;
  };
  return { stdout: join(out), stderr: join(err) };
}

/**
 * One engine, reached over its Unix socket. Holds no connection between
 * calls, so it needs no closing.
 */
export class DockerApi {
  /** The engine's socket path. */
  readonly socket: string;
  readonly #docker: DockerodeLike;

  constructor(socket: string) {
    this.socket = socket;
    this.#docker = new Docker({ socketPath: socket }) as unknown as DockerodeLike;
  }

  /** Turns dockerode's failures into ours; a permission error (a bug) passes through. */
  #fail(error: unknown, what: string): never {
    if (error instanceof Deno.errors.NotCapable) throw error;
    const e = asRecord(error);
    const code = typeof e.code === "string" ? e.code : undefined;
    if (code && UNREACHABLE_CODES.has(code)) {
      throw new EngineUnreachableError(this.socket, code, { cause: error });
    }
    // AbortSignal.timeout() on a short call: node's AbortError (ABORT_ERR), or a DOMException.
    if (e.name === "AbortError" || e.name === "TimeoutError" || code === "ABORT_ERR") {
      throw new EngineUnreachableError(
        this.socket,
        `no answer to ${what} within ${SHORT_CALL_MS} ms`,
        {
          cause: error,
        },
      );
    }
    const status = typeof e.statusCode === "number" ? e.statusCode : undefined;
    const json = asRecord(e.json);
    const detail = typeof json.message === "string"
      ? json.message
      : error instanceof Error
      ? error.message
      : String(error);
    throw new DockerApiError(`${what}: ${detail.trim()}`, status, { cause: error });
  }

  async #call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (error) {
      this.#fail(error, what);
    }
  }

  /**
   * `GET /_ping`.
   *
   * @throws {EngineUnreachableError} when nothing answers within {@linkcode SHORT_CALL_MS}
   */
  async ping(): Promise<void> {
    await this.#call(
      "ping",
      () => this.#docker.ping({ abortSignal: AbortSignal.timeout(SHORT_CALL_MS) }),
    );
  }

  /** `GET /version`. */
  async version(): Promise<EngineVersion> {
    const v = await this.#call(
      "version",
      () => this.#docker.version({ abortSignal: AbortSignal.timeout(SHORT_CALL_MS) }),
    );
    const s = (k: string) => typeof v[k] === "string" ? v[k] as string : "";
    return { version: s("Version"), apiVersion: s("ApiVersion"), os: s("Os"), arch: s("Arch") };
  }

  /**
   * `POST /images/create?fromSrc=-` (`docker import`): makes a one-layer
   * image of a root filesystem tar and tags it `repo:tag`.
   *
   * @param changes Dockerfile instructions for the image's config (`ENV`, `CMD`, `LABEL`, …)
   * @returns the image id (`sha256:…`)
   */
  async importImage(
    tar: Uint8Array | ReadableStream<Uint8Array>,
    ref: { readonly repo: string; readonly tag: string },
    changes: readonly string[] = [],
  ): Promise<string> {
    const source = tar instanceof Uint8Array
      ? Readable.from([Buffer.from(tar.buffer, tar.byteOffset, tar.byteLength)])
      : Readable.fromWeb(tar as Parameters<typeof Readable.fromWeb>[0]);
    const progress = await this.#call(
      "import",
      () =>
        this.#docker.importImage(source, { repo: ref.repo, tag: ref.tag, changes: [...changes] }),
    );
    const messages = await this.#call(
      "import",
      () =>
        new Promise<Record<string, unknown>[]>((resolve, reject) =>
          this.#docker.modem.followProgress(
            progress,
            (error, output) => error ? reject(error) : resolve(output),
          )
        ),
    );
    for (const m of messages) {
      if (typeof m.error === "string") throw new DockerApiError(`import: ${m.error}`, undefined);
    }
    const last = messages.at(-1)?.status;
    if (typeof last === "string" && /^sha256:[0-9a-f]{64}$/.test(last)) return last;
    const info = await this.inspectImage(`${ref.repo}:${ref.tag}`);
    if (!info) {
      throw new DockerApiError(
        `import: the engine made no image ${ref.repo}:${ref.tag}`,
        undefined,
      );
    }
    return info.id;
  }

  /**
   * `GET /images/{name}/json`.
   *
   * @returns null when the engine has no such image
   */
  async inspectImage(name: string): Promise<ImageInfo | null> {
    let raw: Record<string, unknown>;
    try {
      raw = await this.#docker.getImage(name).inspect({
        abortSignal: AbortSignal.timeout(SHORT_CALL_MS),
      });
    } catch (error) {
      if (asRecord(error).statusCode === 404) return null;
      this.#fail(error, `inspect image ${name}`);
    }
    const config = asRecord(raw.Config);
    return {
      id: String(raw.Id ?? ""),
      tags: strings(raw.RepoTags),
      labels: labelsOf(config.Labels),
      env: strings(config.Env),
      created: String(raw.Created ?? ""),
      size: typeof raw.Size === "number" ? raw.Size : 0,
      layers: strings(asRecord(raw.RootFS).Layers),
    };
  }

  /** `POST /images/{name}/tag` (`docker tag NAME repo:tag`); moves `repo:tag` when it exists. */
  async tagImage(
    name: string,
    ref: { readonly repo: string; readonly tag: string },
  ): Promise<void> {
    await this.#call(
      `tag ${name} as ${ref.repo}:${ref.tag}`,
      () => this.#docker.getImage(name).tag({ repo: ref.repo, tag: ref.tag }),
    );
  }

  /**
   * `DELETE /images/{name}?noprune=1` (`docker rmi --no-prune NAME`): a tag
   * of an image that has others is only untagged.
   *
   * @returns false when there was no such image
   */
  async removeImage(name: string): Promise<boolean> {
    try {
      await this.#docker.getImage(name).remove({ noprune: true });
      return true;
    } catch (error) {
      if (asRecord(error).statusCode === 404) return false;
      this.#fail(error, `remove image ${name}`);
    }
  }

  /** `GET /images/json`, optionally filtered by `reference` (`repo`, `repo:tag`, globs) and labels. */
  async listImages(
    filter: { readonly reference?: string; readonly labels?: readonly string[] } = {},
  ): Promise<ImageSummary[]> {
    const filters: Record<string, string[]> = {};
    if (filter.reference) filters.reference = [filter.reference];
    if (filter.labels?.length) filters.label = [...filter.labels];
    const raw = await this.#call("list images", () => this.#docker.listImages({ filters }));
    return raw.map((i) => ({
      id: String(i.Id ?? ""),
      tags: strings(i.RepoTags),
      labels: labelsOf(i.Labels),
    }));
  }

  /**
   * `POST /containers/create`. Confined by default: `--network none`,
   * `--init`, no privileges, nothing mounted but `binds`.
   *
   * @returns the container id
   */
  async createContainer(spec: ContainerSpec): Promise<string> {
    const body: Record<string, unknown> = {
      Image: spec.image,
      Cmd: [...spec.cmd],
      Env: [...(spec.env ?? [])],
      Labels: { ...(spec.labels ?? {}) },
      AttachStdin: false,
      AttachStdout: false,
      AttachStderr: false,
      Tty: false,
      OpenStdin: false,
      HostConfig: {
        Binds: [...(spec.binds ?? [])],
        Init: spec.init ?? true,
        NetworkMode: spec.network ?? "none",
        Privileged: false,
        AutoRemove: false,
      },
    };
    if (spec.name) body.name = spec.name;
    if (spec.user) body.User = spec.user;
    if (spec.workingDir) body.WorkingDir = spec.workingDir;
    const c = await this.#call(
      `create container from ${spec.image}`,
      () => this.#docker.createContainer(body),
    );
    return c.id;
  }

  /** `POST /containers/{id}/start`. */
  async startContainer(id: string): Promise<void> {
    await this.#call(`start container ${id}`, () => this.#docker.getContainer(id).start());
  }

  /**
   * `POST /containers/{id}/wait`: blocks until the container exits.
   *
   * @returns its exit status
   */
  async waitContainer(id: string): Promise<number> {
    const r = await this.#call(
      `wait for container ${id}`,
      () => this.#docker.getContainer(id).wait(),
    );
    if (r.Error?.Message) {
      throw new DockerApiError(`wait for container ${id}: ${r.Error.Message}`, undefined);
    }
    return r.StatusCode;
  }

  /** `GET /containers/{id}/logs` of a container without a TTY, split into stdout and stderr. */
  async containerOutput(id: string): Promise<ContainerOutput> {
    const raw = await this.#call(
      `logs of container ${id}`,
      () => this.#docker.getContainer(id).logs({ stdout: true, stderr: true, follow: false }),
    );
    return demux(new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength));
  }

  /**
   * `DELETE /containers/{id}?force=1&v=1`: kills it if it runs. A container
   * that is already gone counts as removed.
   */
  async removeContainer(id: string): Promise<void> {
    try {
      await this.#docker.getContainer(id).remove({ force: true, v: true });
    } catch (error) {
      if (asRecord(error).statusCode === 404) return;
      this.#fail(error, `remove container ${id}`);
    }
  }

  /** `GET /containers/json?all=1`, filtered by labels (`key` or `key=value`). */
  async listContainers(labels: readonly string[]): Promise<ContainerSummary[]> {
    const raw = await this.#call(
      "list containers",
      () => this.#docker.listContainers({ all: true, filters: { label: [...labels] } }),
    );
    return raw.map((c) => ({
      id: String(c.Id ?? ""),
      names: strings(c.Names),
      image: String(c.Image ?? ""),
      state: String(c.State ?? ""),
      labels: labelsOf(c.Labels),
    }));
  }

  /**
   * `docker run --rm`: create, start, wait, collect the output, remove
   * (also when a step fails).
   */
  async run(spec: ContainerSpec): Promise<RunResult> {
    const id = await this.createContainer(spec);
    try {
      await this.startContainer(id);
      const code = await this.waitContainer(id);
      return { code, ...(await this.containerOutput(id)) };
    } finally {
      await this.removeContainer(id);
    }
  }
}
