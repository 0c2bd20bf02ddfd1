package mongoerr

// Location codes: MongoDB errors identified only by their number (codeName "Location<N>").
// Each is named here so that no other package spells a code.
const (
	Location4570    Code = 4570
	Location10065   Code = 10065
	Location13113   Code = 13113
	Location15947   Code = 15947
	Location15952   Code = 15952
	Location15955   Code = 15955
	Location15957   Code = 15957
	Location15958   Code = 15958
	Location15959   Code = 15959
	Location15973   Code = 15973
	Location15974   Code = 15974
	Location15975   Code = 15975
	Location15976   Code = 15976
	Location15981   Code = 15981
	Location15983   Code = 15983
	Location15998   Code = 15998
	Location16006   Code = 16006
	Location16007   Code = 16007
	Location16020   Code = 16020
	Location16034   Code = 16034
	Location16035   Code = 16035
	Location16406   Code = 16406
	Location16410   Code = 16410
	Location16411   Code = 16411
	Location16412   Code = 16412
	Location16554   Code = 16554
	Location16555   Code = 16555
	Location16556   Code = 16556
	Location16608   Code = 16608
	Location16609   Code = 16609
	Location16610   Code = 16610
	Location16611   Code = 16611
	Location16612   Code = 16612
	Location16702   Code = 16702
	Location16746   Code = 16746
	Location16764   Code = 16764
	Location16766   Code = 16766
	Location16869   Code = 16869
	Location16872   Code = 16872
	Location16874   Code = 16874
	Location16876   Code = 16876
	Location16882   Code = 16882
	Location17053   Code = 17053
	Location17083   Code = 17083
	Location17124   Code = 17124
	Location17217   Code = 17217
	Location17276   Code = 17276
	Location17307   Code = 17307
	Location17308   Code = 17308
	Location17312   Code = 17312
	Location18533   Code = 18533
	Location18535   Code = 18535
	Location18536   Code = 18536
	Location28648   Code = 28648
	Location28656   Code = 28656
	Location28657   Code = 28657
	Location28667   Code = 28667
	Location28680   Code = 28680
	Location28690   Code = 28690
	Location28714   Code = 28714
	Location28724   Code = 28724
	Location28725   Code = 28725
	Location28727   Code = 28727
	Location28729   Code = 28729
	Location28745   Code = 28745
	Location28746   Code = 28746
	Location28747   Code = 28747
	Location28748   Code = 28748
	Location28749   Code = 28749
	Location28756   Code = 28756
	Location28757   Code = 28757
	Location28758   Code = 28758
	Location28759   Code = 28759
	Location28761   Code = 28761
	Location28762   Code = 28762
	Location28763   Code = 28763
	Location28764   Code = 28764
	Location28766   Code = 28766
	Location28808   Code = 28808
	Location28809   Code = 28809
	Location28810   Code = 28810
	Location28811   Code = 28811
	Location28812   Code = 28812
	Location28818   Code = 28818
	Location31002   Code = 31002
	Location31119   Code = 31119
	Location31120   Code = 31120
	Location31138   Code = 31138
	Location31249   Code = 31249
	Location31250   Code = 31250
	Location31252   Code = 31252
	Location31253   Code = 31253
	Location31254   Code = 31254
	Location31255   Code = 31255
	Location31271   Code = 31271
	Location31274   Code = 31274
	Location31275   Code = 31275
	Location31276   Code = 31276
	Location31308   Code = 31308
	Location31324   Code = 31324
	Location31368   Code = 31368
	Location31372   Code = 31372
	Location31382   Code = 31382
	Location31394   Code = 31394
	Location31395   Code = 31395
	Location34443   Code = 34443
	Location34445   Code = 34445
	Location34447   Code = 34447
	Location34449   Code = 34449
	Location34455   Code = 34455
	Location34456   Code = 34456
	Location34461   Code = 34461
	Location34462   Code = 34462
	Location34463   Code = 34463
	Location34466   Code = 34466
	Location34467   Code = 34467
	Location34468   Code = 34468
	Location34471   Code = 34471
	Location34473   Code = 34473
	Location40060   Code = 40060
	Location40061   Code = 40061
	Location40062   Code = 40062
	Location40064   Code = 40064
	Location40065   Code = 40065
	Location40066   Code = 40066
	Location40067   Code = 40067
	Location40068   Code = 40068
	Location40079   Code = 40079
	Location40081   Code = 40081
	Location40085   Code = 40085
	Location40086   Code = 40086
	Location40087   Code = 40087
	Location40091   Code = 40091
	Location40092   Code = 40092
	Location40097   Code = 40097
	Location40101   Code = 40101
	Location40103   Code = 40103
	Location40104   Code = 40104
	Location40105   Code = 40105
	Location40148   Code = 40148
	Location40156   Code = 40156
	Location40157   Code = 40157
	Location40158   Code = 40158
	Location40160   Code = 40160
	Location40169   Code = 40169
	Location40170   Code = 40170
	Location40185   Code = 40185
	Location40192   Code = 40192
	Location40193   Code = 40193
	Location40194   Code = 40194
	Location40196   Code = 40196
	Location40197   Code = 40197
	Location40198   Code = 40198
	Location40199   Code = 40199
	Location40200   Code = 40200
	Location40201   Code = 40201
	Location40202   Code = 40202
	Location40218   Code = 40218
	Location40228   Code = 40228
	Location40234   Code = 40234
	Location40235   Code = 40235
	Location40236   Code = 40236
	Location40237   Code = 40237
	Location40238   Code = 40238
	Location40239   Code = 40239
	Location40240   Code = 40240
	Location40243   Code = 40243
	Location40245   Code = 40245
	Location40246   Code = 40246
	Location40257   Code = 40257
	Location40258   Code = 40258
	Location40260   Code = 40260
	Location40261   Code = 40261
	Location40272   Code = 40272
	Location40319   Code = 40319
	Location40323   Code = 40323
	Location40327   Code = 40327
	Location40390   Code = 40390
	Location40392   Code = 40392
	Location40393   Code = 40393
	Location40395   Code = 40395
	Location40397   Code = 40397
	Location40398   Code = 40398
	Location40400   Code = 40400
	Location40413   Code = 40413
	Location40414   Code = 40414
	Location40415   Code = 40415
	Location40485   Code = 40485
	Location40489   Code = 40489
	Location40515   Code = 40515
	Location40516   Code = 40516
	Location40517   Code = 40517
	Location40523   Code = 40523
	Location40524   Code = 40524
	Location40525   Code = 40525
	Location40536   Code = 40536
	Location40571   Code = 40571
	Location40600   Code = 40600
	Location40601   Code = 40601
	Location40602   Code = 40602
	Location40606   Code = 40606
	Location40670   Code = 40670
	Location50699   Code = 50699
	Location50700   Code = 50700
	Location51001   Code = 51001
	Location51021   Code = 51021
	Location51024   Code = 51024
	Location51047   Code = 51047
	Location51050   Code = 51050
	Location51075   Code = 51075
	Location51081   Code = 51081
	Location51083   Code = 51083
	Location51091   Code = 51091
	Location51104   Code = 51104
	Location51105   Code = 51105
	Location51106   Code = 51106
	Location51108   Code = 51108
	Location51109   Code = 51109
	Location51110   Code = 51110
	Location51111   Code = 51111
	Location51125   Code = 51125
	Location51132   Code = 51132
	Location51134   Code = 51134
	Location51151   Code = 51151
	Location51156   Code = 51156
	Location51173   Code = 51173
	Location51174   Code = 51174
	Location51175   Code = 51175
	Location51176   Code = 51176
	Location51182   Code = 51182
	Location51186   Code = 51186
	Location51187   Code = 51187
	Location51198   Code = 51198
	Location51199   Code = 51199
	Location51246   Code = 51246
	Location51247   Code = 51247
	Location51270   Code = 51270
	Location51272   Code = 51272
	Location51300   Code = 51300
	Location51746   Code = 51746
	Location51760   Code = 51760
	Location327391  Code = 327391
	Location1257300 Code = 1257300
	Location2942505 Code = 2942505
	Location3040501 Code = 3040501
	Location3041704 Code = 3041704
	Location4031700 Code = 4031700
	Location4161105 Code = 4161105
	Location4940400 Code = 4940400
	Location5154700 Code = 5154700
	Location5166403 Code = 5166403
	Location5166405 Code = 5166405
	Location5339901 Code = 5339901
	Location5339902 Code = 5339902
	Location5371602 Code = 5371602
	Location5371603 Code = 5371603
	Location5429414 Code = 5429414
	Location5429513 Code = 5429513
	Location5439015 Code = 5439015
	Location5439017 Code = 5439017
	Location5624900 Code = 5624900
	Location5624901 Code = 5624901
	Location5733201 Code = 5733201
	Location5733401 Code = 5733401
	Location5733402 Code = 5733402
	Location5733403 Code = 5733403
	Location5733412 Code = 5733412
	Location5733501 Code = 5733501
	Location5787801 Code = 5787801
	Location5787901 Code = 5787901
	Location5787902 Code = 5787902
	Location5787906 Code = 5787906
	Location5787907 Code = 5787907
	Location5787908 Code = 5787908
	Location5788001 Code = 5788001
	Location5788002 Code = 5788002
	Location5788004 Code = 5788004
	Location5788005 Code = 5788005
	Location5788604 Code = 5788604
	Location5858202 Code = 5858202
	Location5858203 Code = 5858203
	Location5897900 Code = 5897900
	Location5979700 Code = 5979700
	Location5979703 Code = 5979703
	Location5979704 Code = 5979704
	Location6026501 Code = 6026501
	Location6050202 Code = 6050202
	Location6050203 Code = 6050203
	Location6050204 Code = 6050204
	Location6053600 Code = 6053600
	Location7436100 Code = 7436100
	Location7749501 Code = 7749501
	Location7750301 Code = 7750301

	// getMore from another logical session than the cursor's (getmore_cmd.cpp validateLSID).
	Location50736 Code = 50736
	Location50737 Code = 50737
	Location50738 Code = 50738
)

// Location codes of the $lookup family's memory bounds (issue 10).
const (
	// Location4568: a $lookup's matches for one document exceed
	// internalLookupStageIntermediateDocumentMaxSizeBytes (document_source_lookup.cpp).
	Location4568 Code = 4568
	// Location40099: $graphLookup's visited set and frontier reach
	// internalDocumentSourceGraphLookupMaxMemoryBytes (document_source_graph_lookup.cpp).
	Location40099 Code = 40099
	// Location40271: a $graphLookup foreign document without _id.
	Location40271 Code = 40271

	// $merge modes, command let variables (issue 10 driver-spec fixes).
	Location51181   Code = 51181
	Location4738901 Code = 4738901
	Location4890500 Code = 4890500
)

// applyOps (repl/apply_ops.cpp).
const (
	// Location31056: an applyOps command with partialTxn (a transaction-entry-only field).
	Location31056 Code = 31056
	// Location31240: an applyOps command with count (a transaction-entry-only field).
	Location31240 Code = 31240
	// Location3318200: an applyOps operation whose ns and ui name different collections.
	Location3318200 Code = 3318200
	// Location17439: shard key targeting exceeded kMaxFlattenedInCombinations $in combinations.
	Location17439 Code = 17439
	// Location31180 and Location31181: a chunk major / minor version at its maximum value.
	Location31180 Code = 31180
	Location31181 Code = 31181
	// Location31387: presplitHashedZones without zones, on a non-empty collection or without a
	// hashed field (PresplitHashedZonesSplitPolicy::_validate).
	Location31387 Code = 31387
)

// Zones (sharding_catalog_manager_zone_operations.cpp, KeyPattern::extendRangeBound and
// initial_split_policy.cpp).
const (
	// Location16634 and Location16649: a zone bound whose fields are not the shard key's.
	Location16634 Code = 16634
	Location16649 Code = 16649
	// Location50973: sharding a collection with a zone that no shard has.
	Location50973 Code = 50973
	// Location31388, Location31389, Location31390, Location31391, Location31412: zones that
	// do not allow presplitHashedZones (PresplitHashedZonesSplitPolicy::_validate).
	Location31388 Code = 31388
	Location31389 Code = 31389
	Location31390 Code = 31390
	Location31391 Code = 31391
	Location31412 Code = 31412
)

// $shardedDataDistribution (document_source_sharded_data_distribution.cpp).
const (
	// Location6789100: the stage's spec is not an empty object.
	Location6789100 Code = 6789100
	// Location6789102: the stage is not run as {aggregate: 1} on admin.
	Location6789102 Code = 6789102
)

// Location28769: a pipeline names a sharded collection where it may not (LiteParsedPipeline's
// verifyIsSupported: "<ns> cannot be sharded", e.g. $out to a sharded collection).
const Location28769 Code = 28769

// clearJumboFlag (cluster_clear_jumbo_flag_cmd.cpp, ShardingCatalogManager::clearJumboFlag).
const (
	// Location51260: find names no shard key ("no shard key found in chunk query").
	Location51260 Code = 51260
	// Location51261: bounds that are not exactly one chunk's.
	Location51261 Code = 51261
	// Location51262: the config server finds no chunk with those bounds.
	Location51262 Code = 51262
	// Location51263: the chunk vanished between the read and the update.
	Location51263 Code = 51263
	// Location40628..40632: a session migration's entries out of order (an image link
	// without its image, an image without the entry it belongs to).
	Location40628 Code = 40628
	Location40629 Code = 40629
	Location40630 Code = 40630
	Location40631 Code = 40631
	Location40632 Code = 40632
)

// The router's transaction layer (internal/router, txn*.go).
const (
	// Location50940: commitTransaction for a transaction this router does not know, without
	// a recoveryToken (TransactionRouter::_commitTransaction).
	Location50940 Code = 50940
)

// Authentication (internal/service sasl.go).
const (
	// Location5626701: a connection authenticated as one user tries another
	// (AuthorizationSession::addAndAuthorizeUser).
	Location5626701 Code = 5626701
	// Location51002 and Location51003: createRole of a role, createUser of a user that
	// already exists.
	Location51002 Code = 51002
	Location51003 Code = 51003
)
