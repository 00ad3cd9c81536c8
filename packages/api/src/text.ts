/** The one-line form of a text (`oneLine`) and a cut that never keeps half a character (`cutText`), defined with the domain's text rules: one function for the views, the CLI, the console and the agents. */
// The domain's text module alone (no schemas): the console bundles this without zod.
export { cutText, excerpt, linkableUrl, oneLine } from '@baton/domain/text';
