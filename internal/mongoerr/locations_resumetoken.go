package mongoerr

// Location codes of change stream resume tokens (resume_token.cpp) and of the KeyString
// decoder their `_data` goes through (key_string.cpp).
const (
	// Location31231: a V0 KeyString with a decimal's type bits.
	Location31231 Code = 31231
	// Location40646: a resume token with fields after its last one.
	Location40646 Code = 40646
	// Location40647: `_data` missing or not a string.
	Location40647 Code = 40647
	// Location40648: `_typeBits` not a general BinData.
	Location40648 Code = 40648
	// Location40649: a resume token that decodes to no fields.
	Location40649 Code = 40649
	// Location50615: KeyString type bits read past their end.
	Location50615 Code = 50615
	// Location50788: a v0/v1 token with an eventIdentifier but no UUID.
	Location50788 Code = 50788
	// Location50793: a resume token without txnOpIndex.
	Location50793 Code = 50793
	// Location50794: a negative txnOpIndex.
	Location50794 Code = 50794
	// Location50795: a resume token version other than 0, 1 and 2.
	Location50795 Code = 50795
	// Location50796: a resume token without version.
	Location50796 Code = 50796
	// Location50810 .. Location50833: KeyString format errors (bad type bits, unknown ctype,
	// unterminated strings, bad decimal continuations).
	Location50810 Code = 50810
	Location50811 Code = 50811
	Location50812 Code = 50812
	Location50813 Code = 50813
	Location50814 Code = 50814
	Location50815 Code = 50815
	Location50816 Code = 50816
	Location50817 Code = 50817
	Location50818 Code = 50818
	Location50819 Code = 50819
	Location50820 Code = 50820
	Location50821 Code = 50821
	Location50822 Code = 50822
	Location50823 Code = 50823
	Location50824 Code = 50824
	Location50825 Code = 50825
	Location50826 Code = 50826
	Location50827 Code = 50827
	Location50828 Code = 50828
	Location50829 Code = 50829
	Location50830 Code = 50830
	Location50831 Code = 50831
	Location50832 Code = 50832
	Location50833 Code = 50833
	Location50845 Code = 50845
	Location50846 Code = 50846
	Location50850 Code = 50850
	// Location50854: version is not an int.
	Location50854 Code = 50854
	// Location50855: txnOpIndex is not an int.
	Location50855 Code = 50855
	// Location50870: fromInvalidate is not a bool.
	Location50870 Code = 50870
	// Location50872: a v1+ token without fromInvalidate.
	Location50872 Code = 50872
	// Location50910: KeyString type bits with an overlong size encoding.
	Location50910 Code = 50910
	// Location51055: a v1+ token without tokenType.
	Location51055 Code = 51055
	// Location51056: tokenType is not an int.
	Location51056 Code = 51056
	// Location51057: tokenType neither 0 (high water mark) nor 128 (event).
	Location51057 Code = 51057
	// Location6189500: a v2 token without UUID (or null) and eventIdentifier.
	Location6189500 Code = 6189500
	// Location6189501: a v2 event token without eventIdentifier (decoding).
	Location6189501 Code = 6189501
	// Location6189502: a v2 event token without eventIdentifier (encoding).
	Location6189502 Code = 6189502
	// Location6189503: an eventIdentifier that is not an object.
	Location6189503 Code = 6189503
	// Location6189504: a high water mark token with an eventIdentifier (decoding).
	Location6189504 Code = 6189504
	// Location6189505: a high water mark token with event fields (encoding).
	Location6189505 Code = 6189505
	// Location7182501: a fragmentNum that is not a non-negative int.
	Location7182501 Code = 7182501
	// Location7182504: a fragmentNum on a token older than v2.
	Location7182504 Code = 7182504
)
