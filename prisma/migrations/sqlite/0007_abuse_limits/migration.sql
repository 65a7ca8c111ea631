-- AlterTable
ALTER TABLE "User" ADD COLUMN "emailVerifiedAt" DATETIME;

-- AlterTable
ALTER TABLE "Invitation" ADD COLUMN "tokenHash" TEXT;

-- AlterTable
ALTER TABLE "AgentRegistration" ADD COLUMN "clientAddress" TEXT;

-- CreateTable
CREATE TABLE "EmailToken" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "userId" TEXT NOT NULL,
    "tokenHash" TEXT NOT NULL,
    "purpose" TEXT NOT NULL,
    "email" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" DATETIME NOT NULL,
    "usedAt" DATETIME,
    CONSTRAINT "EmailToken_userId_fkey" FOREIGN KEY ("userId") REFERENCES "User" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "CreditHold" (
    "ownerId" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "amountMicros" BIGINT NOT NULL,
    "expiresAt" DATETIME NOT NULL,

    PRIMARY KEY ("ownerId", "orgId"),
    CONSTRAINT "CreditHold_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "Org" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- RedefineTables
PRAGMA defer_foreign_keys=ON;
PRAGMA foreign_keys=OFF;
CREATE TABLE "new_Org" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "name" TEXT NOT NULL,
    "balanceMicros" BIGINT NOT NULL DEFAULT 0,
    "heldMicros" BIGINT NOT NULL DEFAULT 0,
    "blobBytes" BIGINT NOT NULL DEFAULT 0,
    "isTrial" BOOLEAN NOT NULL DEFAULT false,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL
);
INSERT INTO "new_Org" ("balanceMicros", "createdAt", "id", "isTrial", "name", "updatedAt") SELECT "balanceMicros", "createdAt", "id", "isTrial", "name", "updatedAt" FROM "Org";
DROP TABLE "Org";
ALTER TABLE "new_Org" RENAME TO "Org";
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;

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

-- Backfill: the bytes of each org's live blobs, which the quota now keeps as a running total.
UPDATE "Org" SET "blobBytes" = (SELECT COALESCE(SUM(b."sizeBytes"), 0) FROM "Blob" b WHERE b."orgId" = "Org"."id" AND b."deletedAt" IS NULL);

-- Backfill: accounts made by an OAuth provider (no password) had their email vouched for by it.
UPDATE "User" SET "emailVerifiedAt" = "createdAt" WHERE "passwordHash" IS NULL;
