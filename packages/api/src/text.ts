/** The one-line form of a text (`oneLine`), defined with the domain's text rules: one function for the views, the CLI and the agents. */
export { oneLine } from '@baton/domain';
