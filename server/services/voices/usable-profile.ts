/** A profile synthesis can use: ready and not expired. */
export function isUsableProfile(profile: { status: string; expiresAt: Date | null }, now = Date.now()): boolean {
  return profile.status === 'ready' && (profile.expiresAt === null || profile.expiresAt.getTime() > now);
}
