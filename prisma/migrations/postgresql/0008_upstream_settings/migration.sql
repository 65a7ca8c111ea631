-- AlterTable
ALTER TABLE "Upstream" ADD COLUMN     "settings" JSONB;
