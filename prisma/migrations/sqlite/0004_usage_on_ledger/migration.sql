-- Usage moves onto the debit's ledger row (one row per metered request instead of two).
-- Written by hand from the generated diff: the columns are added in place (no table rebuild
-- of a possibly large ledger), and each existing usage row is copied onto its debit (same
-- org, request, timestamp and amount; both were written in one transaction) before the
-- UsageEvent table goes.

-- AlterTable
ALTER TABLE "LedgerEntry" ADD COLUMN "modelId" TEXT;
ALTER TABLE "LedgerEntry" ADD COLUMN "modality" TEXT;
ALTER TABLE "LedgerEntry" ADD COLUMN "route" TEXT;
ALTER TABLE "LedgerEntry" ADD COLUMN "inputTokens" INTEGER NOT NULL DEFAULT 0;
ALTER TABLE "LedgerEntry" ADD COLUMN "outputTokens" INTEGER NOT NULL DEFAULT 0;
ALTER TABLE "LedgerEntry" ADD COLUMN "characters" INTEGER NOT NULL DEFAULT 0;
ALTER TABLE "LedgerEntry" ADD COLUMN "audioMillis" INTEGER NOT NULL DEFAULT 0;

-- Copy usage onto the debits
UPDATE "LedgerEntry" AS l
   SET "modelId" = u."modelId", "modality" = u."modality", "route" = u."route",
       "inputTokens" = u."inputTokens", "outputTokens" = u."outputTokens",
       "characters" = u."characters", "audioMillis" = u."audioMillis"
  FROM "UsageEvent" AS u
 WHERE l."kind" = 'usage' AND u."orgId" = l."orgId" AND u."requestId" = l."requestId"
   AND u."createdAt" = l."createdAt" AND u."costMicros" = -l."amountMicros";

-- DropIndex
DROP INDEX "UsageEvent_orgId_createdAt_idx";

-- DropIndex
DROP INDEX "UsageEvent_apiKeyId_idx";

-- DropTable
DROP TABLE "UsageEvent";
