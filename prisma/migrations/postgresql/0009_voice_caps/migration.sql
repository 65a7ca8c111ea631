-- AlterEnum
ALTER TYPE "JobKind" ADD VALUE 'delete_engine_copies';

-- AlterTable
ALTER TABLE "VoiceProfile" ADD COLUMN     "madeByClone" BOOLEAN NOT NULL DEFAULT false;

-- CreateTable
CREATE TABLE "EngineClone" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "modelId" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "EngineClone_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "EngineClone_orgId_createdAt_idx" ON "EngineClone"("orgId", "createdAt");

-- AddForeignKey
ALTER TABLE "EngineClone" ADD CONSTRAINT "EngineClone_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "Org"("id") ON DELETE CASCADE ON UPDATE CASCADE;
