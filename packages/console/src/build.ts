// `node packages/console/src/build.ts`: build the console if its sources changed (infra/baton runs it).
import { ensureConsoleBuilt } from './index.ts';

ensureConsoleBuilt((line) => process.stderr.write(`[baton] ${line}\n`));
