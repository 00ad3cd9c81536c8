import type { Migration, MigrationProvider } from 'kysely/migration';
import * as m001 from './001_events.ts';
import * as m002 from './002_read_models.ts';
import * as m003 from './003_deadlines.ts';
import * as m004 from './004_sandboxes_artifacts_corpus.ts';
import * as m005 from './005_input_workspaces.ts';
import * as m006 from './006_leases.ts';
import * as m007 from './007_chat_events.ts';
import * as m008 from './008_task_list.ts';
import * as m009 from './009_mail.ts';
import * as m010 from './010_webhook_redeliveries.ts';
import * as m011 from './011_events_task_tx_idx.ts';
import * as m012 from './012_webhook_endpoints_notify.ts';
import * as m013 from './013_artifact_versions.ts';
import * as m014 from './014_dead_letter_identity.ts';
import * as m015 from './015_task_search_trgm.ts';
import * as m016 from './016_delivery_given_up.ts';
import * as m017 from './017_one_open_redelivery.ts';
import * as m018 from './018_mail_handed_over.ts';
import * as m019 from './019_deployment_namespace.ts';
import * as m020 from './020_task_forks.ts';
import * as m021 from './021_task_webhook_secrets.ts';
import * as m022 from './022_given_up_deliveries.ts';
import * as m023 from './023_deployment_id.ts';

/** Numbered migrations, imported statically so they run the same from source and from a build. */
export const migrations: Record<string, Migration> = {
  '001_events': m001,
  '002_read_models': m002,
  '003_deadlines': m003,
  '004_sandboxes_artifacts_corpus': m004,
  '005_input_workspaces': m005,
  '006_leases': m006,
  '007_chat_events': m007,
  '008_task_list': m008,
  '009_mail': m009,
  '010_webhook_redeliveries': m010,
  '011_events_task_tx_idx': m011,
  '012_webhook_endpoints_notify': m012,
  '013_artifact_versions': m013,
  '014_dead_letter_identity': m014,
  '015_task_search_trgm': m015,
  '016_delivery_given_up': m016,
  '017_one_open_redelivery': m017,
  '018_mail_handed_over': m018,
  '019_deployment_namespace': m019,
  '020_task_forks': m020,
  '021_task_webhook_secrets': m021,
  '022_given_up_deliveries': m022,
  '023_deployment_id': m023,
};

export const migrationProvider: MigrationProvider = { getMigrations: async () => migrations };
