-- AlterTable
ALTER TABLE "Org" ADD COLUMN     "blobBytes" BIGINT NOT NULL DEFAULT 0,
ADD COLUMN     "heldMicros" BIGINT NOT NULL DEFAULT 0;

-- AlterTable
ALTER TABLE "User" ADD COLUMN     "emailVerifiedAt" TIMESTAMP(3);

-- AlterTable
ALTER TABLE "Invitation" ADD COLUMN     "tokenHash" TEXT;

-- AlterTable
ALTER TABLE "AgentRegistration" ADD COLUMN     "clientAddress" TEXT;

-- CreateTable
CREATE TABLE "EmailToken" (
    "id" TEXT NOT NULL,
    "userId" TEXT NOT NULL,
    "tokenHash" TEXT NOT NULL,
    "purpose" TEXT NOT NULL,
    "email" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" TIMESTAMP(3) NOT NULL,
    "usedAt" TIMESTAMP(3),

    CONSTRAINT "EmailToken_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "CreditHold" (
    "ownerId" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "amountMicros" BIGINT NOT NULL,
    "expiresAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "CreditHold_pkey" PRIMARY KEY ("ownerId","orgId")
);

-- CreateIndex
CREATE UNIQUE INDEX "EmailToken_tokenHash_key" ON "EmailToken"("tokenHash");

-- CreateIndex
CREATE INDEX "EmailToken_userId_idx" ON "EmailToken"("userId");

-- CreateIndex
CREATE INDEX "CreditHold_expiresAt_idx" ON "CreditHold"("expiresAt");

-- CreateIndex
CREATE UNIQUE INDEX "Invitation_tokenHash_key" ON "Invitation"("tokenHash");

-- CreateIndex
CREATE INDEX "AgentRegistration_clientAddress_createdAt_idx" ON "AgentRegistration"("clientAddress", "createdAt");

-- AddForeignKey
ALTER TABLE "EmailToken" ADD CONSTRAINT "EmailToken_userId_fkey" FOREIGN KEY ("userId") REFERENCES "User"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "CreditHold" ADD CONSTRAINT "CreditHold_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "Org"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Backfill: the bytes of each org's live blobs, which the quota now keeps as a running total.
UPDATE "Org" SET "blobBytes" = (SELECT COALESCE(SUM(b."sizeBytes"), 0) FROM "Blob" b WHERE b."orgId" = "Org"."id" AND b."deletedAt" IS NULL);

-- Backfill: accounts made by an OAuth provider (no password) had their email vouched for by it.
UPDATE "User" SET "emailVerifiedAt" = "createdAt" WHERE "passwordHash" IS NULL;
