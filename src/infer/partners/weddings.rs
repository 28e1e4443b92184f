//! A wedding after an engagement: "We got married on Saturday" after "My fiancé Tom and
//! I are planning our wedding".

/// Words of a wedding or an engagement in the first person ("we got married", "je me suis
/// mariée", "ich habe geheiratet", "mi sono sposata", "me casé", "casei", "ik ben
/// getrouwd"), said with a [`SPEAKER`] word before them.
pub(super) const WED: &[&str] = &[
    "married",
    "engaged",
    "marie",
    "mariee",
    "maries",
    "fiance",
    "fiancee",
    "geheiratet",
    "verheiratet",
    "verlobt",
    "sposato",
    "sposata",
    "sposati",
    "fidanzato",
    "fidanzata",
    "case",
    "casado",
    "casada",
    "casei",
    "casamos",
    "noivei",
    "getrouwd",
    "verloofd",
];

/// Words that put a wedding ahead: "we're getting married next year", "on va se marier".
pub(super) const AHEAD: &[&str] = &[
    "getting",
    "will",
    "going",
    "gonna",
    "next",
    "soon",
    "plan",
    "planning",
    "va",
    "allons",
    "werden",
    "wollen",
    "bald",
    "nachstes",
    "prossimo",
    "prossima",
    "vamos",
    "proximo",
    "proxima",
    "vou",
    "gaan",
    "volgend",
    "volgende",
    "binnenkort",
];

/// Words of having married, in the past or the present of being married: "we got
/// married", "je me suis mariée", "wir haben geheiratet", "mi sono sposata", "me casé"
/// (after "me" only: English "case"), "casei", "we zijn getrouwd", "tied the knot". A
/// word the text capitalises is a name ("Marie").
pub(super) const MARRIED: &[&str] = &[
    "married",
    "knot",
    "marie",
    "mariee",
    "maries",
    "geheiratet",
    "verheiratet",
    "sposato",
    "sposata",
    "sposati",
    "case",
    "casado",
    "casada",
    "casados",
    "casei",
    "casamos",
    "getrouwd",
];

/// The indices of [`MARRIED`] words in `words`, of which `names` are none.
pub(super) fn married_at<'a>(
    words: &'a [String],
    names: &'a [String],
) -> impl Iterator<Item = usize> + 'a {
    words.iter().enumerate().filter_map(move |(i, w)| {
        let married = MARRIED.contains(&w.as_str())
            && !names.contains(w)
            && (w != "case" || i > 0 && words[i - 1] == "me");
        married.then_some(i)
    })
}

/// Partners before a wedding: a boyfriend or girlfriend, a fiancé, being engaged.
pub(super) const BEFORE_WEDDING: &[&str] = &[
    "boyfriend",
    "girlfriend",
    "fiance",
    "fiancee",
    "engaged",
    "copain",
    "copine",
    "freund",
    "freundin",
    "verlobt",
    "verlobte",
    "verlobter",
    "fidanzato",
    "fidanzata",
    "ragazzo",
    "ragazza",
    "novio",
    "novia",
    "prometido",
    "prometida",
    "namorado",
    "namorada",
    "noivo",
    "noiva",
    "vriend",
    "vriendin",
    "verloofd",
    "verloofde",
];
