import { cutText, formatBytes, type InputWorkspace } from '@baton/domain';
import { loadExample, parseWorkspaceArchive, UnknownExampleError, workspaceDigest, type WorkspaceFile } from '@baton/storage';
import type { FastifyRequest } from 'fastify';
import type { GatewayDeps, WorkspaceUpload } from '../deps.ts';
import { HttpError } from '../errors.ts';
import { jsonDepthError } from '../json-depth.ts';
import { SubmitTaskBody, type WorkspaceInput } from './schemas.ts';

/** A submitted workspace, checked and digested but not yet stored. */
export interface ResolvedWorkspace {
  source: InputWorkspace['source'];
  name: string | null;
  files: WorkspaceFile[];
  digest: string;
}

/**
 * The workspace a submission brings (null: none): an example from the examples directory, a
 * base64 archive in the JSON body, or the multipart form's file part. Unsafe or oversized
 * archives throw WorkspaceArchiveError (400 / 413 in the error handler).
 */
export async function resolveWorkspace(d: GatewayDeps, input: WorkspaceInput | undefined, upload: WorkspaceUpload | null): Promise<ResolvedWorkspace | null> {
  const resolved = async (source: ResolvedWorkspace['source'], name: string | null, files: WorkspaceFile[]): Promise<ResolvedWorkspace> => ({ source, name, files, digest: workspaceDigest(files) });
  if (upload) return resolved('upload', upload.name, await parseWorkspaceArchive(upload.archive, d.workspaceLimits));
  if (!input) return null;
  if (input.example !== undefined) {
    try {
      return resolved('example', input.example, await loadExample(d.examplesDir, input.example, d.workspaceLimits));
    } catch (err) {
      if (err instanceof UnknownExampleError) throw new HttpError(400, 'validation_error', `body.workspace.example: ${err.message}`, [{ field: 'body.workspace.example', message: 'unknown example' }]);
      throw err;
    }
  }
  const archive = Buffer.from(input.archiveBase64 ?? '', 'base64');
  return resolved('upload', input.name ?? null, await parseWorkspaceArchive(archive, d.workspaceLimits));
}

/** POST /v1/tasks's body limit: the default one plus a base64 archive of the largest size accepted. */
export const submitBodyLimit = (d: GatewayDeps): number => d.bodyLimit + Math.ceil(d.workspaceLimits.maxArchiveBytes / 3) * 4;

/**
 * POST /v1/tasks as multipart/form-data (a preValidation hook): the `task` field holds the JSON
 * body, the `workspace` file part the .tar.gz. The task is validated here so that errors name
 * `task.<field>`; the route's own validation then sees an already-valid body.
 */
export async function readMultipartSubmission(d: GatewayDeps, req: FastifyRequest): Promise<void> {
  if (!req.isMultipart()) return;
  const form = "the form has a 'task' field (the JSON body) and a 'workspace' file part (the .tar.gz)";
  let task: unknown;
  let upload: WorkspaceUpload | null = null;
  try {
    for await (const part of req.parts({ limits: { files: 1, fields: 1, parts: 2, fieldSize: d.bodyLimit, fileSize: d.workspaceLimits.maxArchiveBytes } })) {
      if (part.type === 'file') {
        if (part.fieldname !== 'workspace') {
          part.file.resume();
          throw new HttpError(400, 'validation_error', `multipart: unexpected file part '${part.fieldname}'; ${form}`, [{ field: part.fieldname, message: 'unexpected file part' }]);
        }
        upload = { archive: await part.toBuffer(), name: part.filename ? cutText(part.filename, 255) : null };
      } else if (part.fieldname === 'task') {
        if (part.valueTruncated) throw new HttpError(413, 'payload_too_large', `task: the field is larger than ${formatBytes(d.bodyLimit)}`);
        task = part.value;
      } else {
        throw new HttpError(400, 'validation_error', `multipart: unexpected field '${part.fieldname}'; ${form}`, [{ field: part.fieldname, message: 'unexpected field' }]);
      }
    }
  } catch (err) {
    switch ((err as { code?: string }).code) {
      case 'FST_REQ_FILE_TOO_LARGE':
        throw new HttpError(413, 'workspace_too_large', `workspace: the archive is larger than ${formatBytes(d.workspaceLimits.maxArchiveBytes)}`);
      case 'FST_FILES_LIMIT':
      case 'FST_FIELDS_LIMIT':
      case 'FST_PARTS_LIMIT':
      case 'FST_PROTO_VIOLATION':
        throw new HttpError(400, 'validation_error', `multipart: ${form}, nothing else`);
      case 'FST_INVALID_JSON_FIELD_ERROR':
        throw new HttpError(400, 'invalid_json', 'task: not valid JSON');
      default:
        if (err instanceof HttpError) throw err;
        // The parser's own complaints (no boundary, a body cut short, a broken header): the client's body, not a fault here.
        throw new HttpError(400, 'bad_multipart', `multipart: the body is not well-formed multipart/form-data (${(err as Error).message}); ${form}`);
    }
  }
  if (task === undefined) throw new HttpError(400, 'validation_error', `task: missing; ${form}`, [{ field: 'task', message: 'required' }]);
  if (typeof task === 'string') {
    try {
      task = JSON.parse(task);
    } catch (err) {
      throw new HttpError(400, 'invalid_json', `task: ${(err as Error).message}`);
    }
  }
  const tooDeep = jsonDepthError(task, 'task');
  if (tooDeep) throw tooDeep;
  const parsed = SubmitTaskBody.safeParse(task);
  if (!parsed.success) {
    const details = parsed.error.issues.map((i) => ({ field: ['task', ...i.path.map(String)].join('.'), message: i.message }));
    throw new HttpError(400, 'validation_error', details.map((x) => `${x.field}: ${x.message}`).join('; '), details);
  }
  if (upload && parsed.data.workspace) throw new HttpError(400, 'validation_error', "task.workspace: the archive is the form's 'workspace' file part; leave workspace out of task", [{ field: 'task.workspace', message: 'given twice' }]);
  req.body = parsed.data;
  req.workspaceUpload = upload;
}
