-- CreateEnum
CREATE TYPE "SpendWindow" AS ENUM ('day', 'month');

-- AlterTable
ALTER TABLE "ApiKey" ADD COLUMN     "allowedModels" JSONB,
ADD COLUMN     "expiresAt" TIMESTAMP(3),
ADD COLUMN     "heldMicros" BIGINT NOT NULL DEFAULT 0,
ADD COLUMN     "spendLimitMicros" BIGINT,
ADD COLUMN     "spendWindow" "SpendWindow",
ADD COLUMN     "windowSpentMicros" BIGINT NOT NULL DEFAULT 0,
ADD COLUMN     "windowStartedAt" TIMESTAMP(3);

-- CreateTable
CREATE TABLE "KeyHold" (
    "ownerId" TEXT NOT NULL,
    "apiKeyId" TEXT NOT NULL,
    "amountMicros" BIGINT NOT NULL,
    "expiresAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "KeyHold_pkey" PRIMARY KEY ("ownerId","apiKeyId")
);

-- CreateIndex
CREATE INDEX "KeyHold_expiresAt_idx" ON "KeyHold"("expiresAt");

-- AddForeignKey
ALTER TABLE "KeyHold" ADD CONSTRAINT "KeyHold_apiKeyId_fkey" FOREIGN KEY ("apiKeyId") REFERENCES "ApiKey"("id") ON DELETE CASCADE ON UPDATE CASCADE;
