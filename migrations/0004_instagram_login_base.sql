-- Instagram gateways without a page_id use the Instagram Login flow, whose Send API is on
-- graph.instagram.com (FACTS B1). The old default stored graph.facebook.com for them; drop
-- it so the adapter picks the right host. A base_url the operator chose is left alone.
UPDATE `gateways` SET `settings` = json_remove(`settings`, '$.base_url')
 WHERE `kind` = 'meta_instagram' AND json_valid(`settings`)
   AND json_extract(`settings`, '$.page_id') IS NULL
   AND json_extract(`settings`, '$.base_url') = 'https://graph.facebook.com';
