-- AlterTable
ALTER TABLE "Voice" ADD COLUMN     "searchText" TEXT NOT NULL DEFAULT '',
ADD COLUMN     "tagIndex" TEXT NOT NULL DEFAULT '';
