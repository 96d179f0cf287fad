-- Contacts are found by email in lower case from now on (src/lib/email.ts contactEmail).
-- Lower-case the stored ones; where that would collide with another contact of the same
-- partner (ANN@x and ann@x stored as two), the mixed-case one is left as it is.
UPDATE `contacts` SET `email` = lower(trim(`email`))
 WHERE `email` IS NOT NULL AND `email` <> lower(trim(`email`))
   AND NOT EXISTS (SELECT 1 FROM `contacts` AS `other` WHERE `other`.`partner_id` = `contacts`.`partner_id` AND `other`.`email` = lower(trim(`contacts`.`email`)));
