import type { Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';

export const MAX_ORG_NAME = 200;

export async function renameOrg(prisma: Prisma, input: { orgId: string; name: string }): Promise<{ id: string; name: string }> {
  const name = input.name.trim();
  if (!name || name.length > MAX_ORG_NAME) throw new ServiceError('invalid_request', `Organization name must be 1-${MAX_ORG_NAME} characters.`, 'name');
  const { count } = await prisma.org.updateMany({ where: { id: input.orgId }, data: { name } });
  if (count === 0) throw new ServiceError('org_not_found', `No organization with id ${input.orgId}.`);
  return { id: input.orgId, name };
}
