// Every relative link in README.md, CONTRIBUTING.md and docs/ names a file that exists, and every
// #fragment names a heading of the file it points into: the docs are split over many files, and
// a section moved from one to another must not leave its links behind.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const REPO = resolve(import.meta.dirname, '..');

// Pages that are linked before they are written. A page here that exists fails the test below,
// so the entry is removed as soon as the page lands.
const NOT_WRITTEN_YET: string[] = [];

function markdownFiles(root: string): string[] {
  const files = ['README.md', 'CONTRIBUTING.md'].filter((name) => existsSync(join(root, name)));
  const walk = (dir: string): void => {
    if (!existsSync(join(root, dir))) return;
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.md')) files.push(path);
    }
  };
  walk('docs');
  return files;
}

/** The text outside fenced code blocks, line by line (links and headings in code are not links). */
function proseLines(text: string): string[] {
  let fenced = false;
  return text.split('\n').filter((line) => {
    if (/^\s*```/.test(line)) {
      fenced = !fenced;
      return false;
    }
    return !fenced;
  });
}

/** The anchors GitHub gives a file's headings: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function headingAnchors(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of proseLines(text)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const slug = heading[1]!
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** Each relative link of the Markdown files under `root` that names no file, or no heading of it. */
function brokenLinks(root: string, pending: readonly string[] = []): string[] {
  const broken: string[] = [];
  for (const file of markdownFiles(root)) {
    const text = readFileSync(join(root, file), 'utf8');
    proseLines(text).forEach((line) => {
      const withoutCode = line.replace(/`[^`]*`/g, '');
      for (const [, target] of withoutCode.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target!)) continue; // https:, mailto:
        const [path = '', fragment] = target!.split('#');
        const targetFile = path === '' ? join(root, file) : resolve(root, dirname(file), path);
        const fromRoot = relative(root, targetFile);
        if (pending.includes(fromRoot)) continue;
        if (!existsSync(targetFile)) {
          broken.push(`${file}: ${target} (no such file)`);
        } else if (fragment && statSync(targetFile).isFile() && targetFile.endsWith('.md')) {
          if (!headingAnchors(readFileSync(targetFile, 'utf8')).has(fragment)) broken.push(`${file}: ${target} (no such heading)`);
        }
      }
    });
  }
  return broken;
}

describe('documentation links', () => {
  it('every relative link in README.md, CONTRIBUTING.md and docs/ resolves to a file and a heading', () => {
    expect(markdownFiles(REPO)).toContain('README.md');
    expect(brokenLinks(REPO, NOT_WRITTEN_YET)).toEqual([]);
  });

  it('pages linked before they are written are still unwritten (remove them from NOT_WRITTEN_YET once they exist)', () => {
    for (const page of NOT_WRITTEN_YET) expect(existsSync(join(REPO, page)), `${page} exists now`).toBe(false);
  });

  describe('the check itself', () => {
    const root = mkdtempSync(join(tmpdir(), 'docs-links-'));
    afterAll(() => rmSync(root, { recursive: true, force: true }));
    mkdirSync(join(root, 'docs'));
    writeFileSync(join(root, 'docs', 'a.md'), '# Page A\n\n## Keys and `auth`: one way\n\n## Keys and `auth`: one way\n');
    writeFileSync(
      join(root, 'README.md'),
      [
        '# Readme',
        '[fine](docs/a.md) [fine](docs/a.md#keys-and-auth-one-way) [repeat](docs/a.md#keys-and-auth-one-way-1)',
        '[here](#readme) [web](https://example.com/x.md) `[code](docs/none.md)`',
        '[gone](docs/missing.md) [no heading](docs/a.md#keys) [no heading here](#nothing)',
        '```',
        '[in a fence](docs/none.md)',
        '```',
      ].join('\n'),
    );

    it('reports a missing file and a missing heading, and nothing else', () => {
      expect(brokenLinks(root)).toEqual([
        'README.md: docs/missing.md (no such file)',
        'README.md: docs/a.md#keys (no such heading)',
        'README.md: #nothing (no such heading)',
      ]);
    });

    it('skips the pages it is told are not written yet', () => {
      expect(brokenLinks(root, ['docs/missing.md'])).toEqual(['README.md: docs/a.md#keys (no such heading)', 'README.md: #nothing (no such heading)']);
    });
  });
});
