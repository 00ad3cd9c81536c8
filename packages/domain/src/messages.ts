import { z } from 'zod';

/** The unit a size is counted in, by what was measured. */
const UNITS: Readonly<Record<string, [one: string, many: string]>> = { string: ['character', 'characters'], array: ['item', 'items'], set: ['item', 'items'], map: ['entry', 'entries'], file: ['byte', 'bytes'] };

const withArticle = (type: string): string => (/^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`);

/**
 * What a refused value is told wherever its schema gives no words of its own: plain phrases a
 * person (or a model reading a tool error) acts on — "required", "must be a string", "must have at
 * least 1 item" — instead of zod's defaults ("Invalid input: expected string, received undefined",
 * "Too small: expected array to have >=1 items"). Anything else keeps zod's message.
 */
export function plainMessage(issue: z.core.$ZodRawIssue): string | undefined {
  switch (issue.code) {
    case 'invalid_type':
      return issue.input === undefined ? 'required' : `must be ${withArticle(String(issue.expected))}`;
    case 'too_small':
    case 'too_big': {
      const small = issue.code === 'too_small';
      const limit = Number(small ? issue.minimum : issue.maximum);
      const unit = UNITS[String(issue.origin)];
      if (small && limit === 1 && issue.origin === 'string') return 'must not be empty';
      const bound = small ? (issue.inclusive === false ? 'more than' : 'at least') : issue.inclusive === false ? 'less than' : 'at most';
      return unit ? `must have ${bound} ${limit} ${limit === 1 ? unit[0] : unit[1]}` : `must be ${bound} ${limit}`;
    }
    case 'unrecognized_keys':
      return `unknown field${issue.keys.length === 1 ? '' : 's'} ${issue.keys.map((k) => `'${k}'`).join(', ')}`;
    default:
      return undefined;
  }
}

// Set once, when the domain is loaded (every service and the CLI load it): one wording everywhere.
z.config({ customError: plainMessage });
