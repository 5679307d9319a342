"""The offline extractor: a graph from capitalisation and co-occurrence, no model involved.

This is the "fast" indexing method (as in GraphRAG's NLP graph / LazyGraphRAG): entities are
the proper names a reader would underline, relationships are names that share a sentence.

``extract_offline`` is a pure function of one chunk's text. The incremental indexer re-extracts
only changed chunks and merges per-chunk results, so nothing here may look beyond the chunk:
no corpus statistics, no global state, no randomness. Down-weighting of very frequent names
happens at merge time, where the whole graph is known.

How a chunk is read:

* Text is composed (NFC) first, so a name is one however its accents were typed; a word keeps
  the combining marks a letter without a precomposed form carries ("Olúwaṣẹ́un").
* Blocks are split on blank lines; hard-wrapped lines are joined, but for a line that is a name
  alone or a title where no wrap ended it, or one ending with a name whose word opens the next
  ("Ada Lovelace" over "Ada was ...": ``_ends_alone``), lines measured as a wrap measures them,
  in display columns (a wide character two: ``_columns``). ALL-CAPS lines ("STAVE ONE", "MARLEY'S
  GHOST") are headings and yield nothing. A short line without final punctuation whose words are
  mostly capitalised (or such lines a wrap cut) is a headline: title case makes every word look
  like a name, so only names also found in the body are looked for in it, unless it is an
  honorific and a name alone whose word the body opens a sentence with alone ("Dr. Ada Lovelace"
  over "Ada was ...": that name; "Dr. Lowe Resigns" over "Lowe said ...": a surname before a
  verb, "Lowe"). Title case leaves only small words in lower case (articles,
  conjunctions, prepositions); a line with a lower-case verb or noun ("Kim Lowe met Leo Marsh in
  Dublin") is a sentence without its full stop, as CSV and JSONL rows often are, and its capitals
  are names. A Markdown table's row is a sentence of its own, each cell opening as a sentence does
  ("| City |" is no place), and descriptions quote it as its cells read ("Ada Osk; Boston."),
  without its pipes. So is a record's line, one of two or more in a row each opening with a
  field's label ("To: Ada Lovelace <ada@x.org>" over "From: ...", an e-mail's headers) or of one
  shape, the same small words between capitals ("Ada Lovelace of London" over "Charles Babbage
  of Cambridge", a list without bullets); an e-mail address's user is no word in lower case.
* A name is a run of capitalised words, which may be joined by name particles ("van", "de"),
  by "&", and by "of" / "of the" after an institutional head ("Bank of England", "Ministry of
  Trade", "Ghost of Christmas Past"). A year next to an event word belongs to the event
  ("2032 Torford Heights Trade Summit"). A possessive ends the name ("Scrooge's" -> "Scrooge"),
  but a plural's goes on into the institution it names ("the Fishermen's Guild").
* A capitalised word that opens a sentence (or a quotation, or an emphasis: "_Laden") is dropped
  when it is a common word (English, or a French or Russian opener: "Selon", "Mais", "Вчера",
  "В") or appears in lower case elsewhere in the chunk, in any alphabet; alone, it counts
  only if the chunk also capitalises it mid-sentence. A list item's first word is dropped so
  when it is a verb giving an order ("- [ ] Email Babbage", "- Call Ada"), any sentence's when
  it is one before a name no verb follows ("Ask Margaret about the demo."; not "Read Hollis
  wrote"), or such a verb's past tense before a name ("Met Ada again."). ALL-CAPS words are
  acronyms only alone and up to 6 letters.
* Mid-sentence, a lone capitalised word without a type cue is a common noun in capitals (Dickens'
  "a Glee or Catch", "the Parrot", "another Hope") when the chunk also writes it in lower case
  or only ever puts a determiner or another name's possessive before it: English gives a
  person's name neither. Used three times or more in the chunk, or speaking or acting right
  after "the" ("said the Ghost", "the Phantom pointed", "the Ghost was pleased"; not what is
  done to it: "The Engine was described"), it names a character all the same; a plural beside its surname is a family
  ("the Cratchits" beside "Mrs. Cratchit"). The
  adjectives that open names in capitals are adjectives in lower case between "a" and the word
  ("a bad young Act"), a person's epithet after "the" ("the young Mozart"). A phrase in
  capitals only ever right after "the", with no cue of a type, is rarely a person's name: it is
  a concept ("the Invisible World", "the Poll Tax", "the Holy Spirit", "the Red Cross"),
  however often used and whatever it does (bodies and laws act too), unless it speaks, does
  what only the living do ("the White Rabbit ran", "the Cowardly Lion roared": _LIVING_VERBS;
  neither counts when it names the sacred: "The Holy Ghost blessed them", "The Holy Ghost said
  nothing"), or its head names someone by
  role or kind (a title, kin, "Lama", "Men", an agent noun: "the Prime Minister", "the Dalai
  Lama", "the Wise Men", "the Artful Dodger": _PERSON_HEADS), or a role stands before one name
  ("the Virgin Mary", "the Prophet Elijah": _ROLES_BEFORE_NAMES; not "the Virgin Birth"). A greeting's
  adjective is no part of the holiday ("Merry Christmas" -> "Christmas"). A name only ever
  after a measure's "of" or a verb of eating is a dish or a drink, and so are its short forms
  ("a great piece of Cold Roast", "ate Cold Roast"; "the Roast and Boiled"); not one before a word in lower case ("a glass of Napa
  Valley wine"), nor after "a bit of", "portions of" ("a bit of Shakespeare"), nor a full name
  eaten that opens with a given name or whose surname the chunk uses alone ("The bear ate
  Timothy Treadwell").
* German capitalises every noun. A chunk where German function words ("der", "und", "nicht" ...)
  make up 6% of the words is read so: a word after an article or its contraction ("den
  Präsidenten", "am Montag", "im Haus") is a noun wherever it stands, and a run loses such
  leading nouns and compound titles ("Bundespräsident Frank-Walter Steinmeier" -> "Frank-Walter
  Steinmeier"); a capitalised adjective keeps the run whole ("die Deutsche Bank"). Only "von"
  and "zu" are particles, after a first name and before a one-word surname ("Ursula von der
  Leyen"; "der" between two nouns joins nothing). A lone word is a name only with a cue (a
  known place or body, a place ending, "Herr"/"Frau"), as the short form of a longer name, or
  inside two sentences, never after an article or a preposition ("Anna und Peter ... Peter");
  an English body word is no cue ("Gas", "Post").
* Honorifics: "Mr.", "Ms.", "Dr.", "Prof.", "Sir" ... are dropped, so "Mr. Fezziwig" and
  "Fezziwig" are one person. "Mrs.", "Miss", "Lady" ... are kept ("Mrs. Cratchit") because
  they usually name a different person from the bare surname (a wife, a daughter).
  Titles such as "President" or "King" are kept as part of the name.
* Within the chunk, a lone surname, first name, short organisation name or acronym is
  resolved to the one longer name it abbreviates ("Torquay" and "Mr. Torquay" ->
  "Kenji Torquay"; "DMG" -> "Drumholm Media Group"; "Fishermen's Guild" -> "Fishermen's Guild of
  Port Vell"); when two names fit, it stays as written, unless it ends as places do and no
  place's cue is beside it: then it is a surname, and the one person it ends wins ("Westbury"
  beside "Tom Westbury" and "Westbury Holdings"). A lone word a place's preposition puts in some
  mentions only, beside the one person whose surname it is, is typed per mention: the place
  where so placed, that person elsewhere ("walked beyond Highgate" ... "Ann Highgate" ...
  "Highgate said no").
* Types come from cues: event words at the end (holidays too: "Easter"), organisation words
  anywhere, a capital inside a word, as firms and products write it ("GitHub", "PayPal"; not a
  surname's prefix nor a given name: "McDonald", "LeBron", "JoAnn"; nor a degree: "PhD"; nor a
  surname's prefix in a name opening with a given name: "Ann AbuBakr", not "Sam GitHub"; a
  person's cue beats it), place suffixes and prefixes, a small gazetteer, "in"/"near"/"à"/"в"
  before the name, honorifics, a building's head after a determiner ("the Mansion House", "at
  the Lantern Hall", "the Golden Temple"); otherwise a multi-word name is a person, and so is a
  lone word. A lone word ending as places do ("Bradford",
  "Whitechapel") is a place unless the chunk gives it a person's cue: an honorific ("Ms.
  Belford") or a kept title ("Mrs. Thornbury"), a verb of speech beside it ("Ruvford said";
  not "said Oxford scored", where a verb after it makes it what was said)
  or a person's gesture after it ("Belford smiled", "Ashford nodded": _PERSON_VERBS),
  or a full name it is the surname of ("Belford" beside "Zofia Belford"), as surnames end so
  too. Endings surnames share as often ("-hill", "-gate", "-wich", "-bury", "-bridge": Churchill,
  Southgate, Ashbury, Bainbridge) say a place only after a place's preposition in the chunk ("on
  Cornhill", "walked to Highgate", "from Norwich to Ipswich", "the chair at Cambridge"; not
  "according to Southgate"): the cues are the chunk's, and a chunk with the bare surname alone
  is no biography's place. Any other lone word is a place after "in" or a going's "to", "from"
  ... in the chunk ("moved to Hampstead"; "at" only after an arrival or a going, "docked at
  Sausalito"; not after a going that takes someone as readily, "went to Priya", "came from
  Ravi", "back to Marcus", nor "into", "near": "bumped into Ravi", nor "in" after a word taking
  someone: "confided in Priya"), unless it shortens a longer name there or a person's cue says
  otherwise ("Kim Lowe went through Customs" is a place: one goes through no one, and along
  only a place, and so do a road or a train: "The road goes through Tarnwick"; a thing goes
  through someone's hands: "Everything goes through Priya"). A lone word
  only ever after the "at" of a job, a working, a study or a meeting is a body's, as often as a
  place's, rarely a person's ("editor at Ruvtane", "worked at Ruvtane", "met at Google"; not
  after any other word: "smiled at Fred", "took a swipe at Johnson").
  A place is not called by its generic word alone: "Hill" with no determiner or place's
  preposition before it, beside the one name ending in it or with a person's cue, is a surname,
  and that name a person's ("Tom Hill ... Later Hill returned"; "Mr. Hill"), unless it qualifies
  a noun ("Capitol Hill ... Hill staffers left"); a word no one bears as a surname ("City",
  "County") is the place's ("Manchester City ... City dominated"): there the word is the short
  form of the one name it ends, whatever that is ("Jon Park ... Park officials left"). A name
  such a word ends, no other cue making it a place, is a person's when it speaks or goes ("Jon
  Park arrived", "Jon Park said no") and opens with a given name or a word the chunk also uses
  alone (not after "the": "the Capitol"), or an honorific stands before it ("Dr. Olusegun
  Park"); not a street's, nor a place that goes and speaks for its trade, office or film ("Wall
  Street came under pressure", "Downing Street said", "Capitol Hill said", "Jurassic Park came out").
  A given name before "Lane", "Hill" or "Park" is a person's whatever it does ("published by
  John Lane"), no place's cue beside it.
* Descriptions are the first sentences that mention the entity (about 40 words).
* Relationships: two entities in one sentence (strong) or in adjacent sentences of one block
  (weak); strength 1..10 from those counts; each entity keeps its 10 strongest.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterator

from streamrag.records import EntityRecord, Extraction, RelationshipRecord
from streamrag.sentences import (CJK_CLOSERS, CJK_TERMINATORS, HONORIFICS, TITLE_SMALL, is_title, joined,
                                 table_row_text, table_rows)

# 7: a line of prose wrapped before "12. " (no list numbered from 1 above) continues the prose.
# 8: a Markdown table's rows are read one by one, each cell opening as a sentence does.
# 9: a line in capitals under one dropped as a heading is dropped too ("TEARS." ending a paragraph).
# 10: French bodies are organisations ("Banque de France", "Société Générale").
# 11: a table's row is described by its cells ("Ada Osk; Boston."), not quoted with its pipes.
# 12: text is composed (NFC) and a word keeps the combining marks left on it ("Olúwaṣẹ́un").
# 13: a lone word ending as places do is a place, unless a person's cue says otherwise ("Cornhill",
#     "Whitechapel"; "Ms. Belford", "Belford said").
# 14: "a bad young Act" is a common noun (a lower-case adjective between it and "a"); a phrase
#     in capitals only ever right after "the", with no cue, is a concept ("the Invisible World").
# 15: a word drawn out in speech is no name ("Scro-o-o-o-oge").
# 16: a title kept in a name makes its last word a surname, no place ("Mrs. Thornbury" ... "Thornbury").
# 17: "the young Mozart" is a person again (14 made it a common noun with "a bad young Act").
# 18: a phrase after "the" ending in a title is a person by role, no concept ("the Prime Minister").
# 19: a place's ending is read on a hyphened word's first part again ("Stratford-upon-Avon").
# 20: capitals of any alphabet between hyphens are initials, no word drawn out ("Ли-Я-Ю-Ким");
#     "-hill", "-gate", "-wich", "-bury" say a place only after a place's preposition ("on Cornhill");
#     a phrase after "the" is a concept only with an idea's head ("the Poor Law"; "the Dalai Lama").
#     A table's rows are sentences.table_rows's (a table in a "> " quote too).
# 22: "along", "beyond" (not after a word taking a person), "past", "around" (after a going) say
#     a place for "-hill" ... "-bury" ("walked along Cornhill", "drove past Greenwich"); such a
#     word with no place beside it joins the one person whose surname it is ("Westbury" beside
#     "Tom Westbury" and "Westbury Holdings").
# 23: a phrase after "the" is a person only by its head or by speaking ("the Holy Spirit", "The
#     Poll Tax was hated" are concepts); "gate" is a building's head ("the Golden Gate"); a
#     place's generic word alone is a surname ("Tom Hill ... Later Hill returned": no place);
#     a word placed in some mentions only is typed per mention ("beyond Highgate", "Highgate said");
#     a name only after a measure's "of" is no entity ("a great piece of Cold Roast"); any lone
#     word "in" or a going's "to" puts in the chunk is a place ("moved to Hampstead"), one
#     before a person's gesture a person ("Ashford scored"); "at", "on" ... after an arrival or
#     a going say the place ("docked at Sausalito").
# 24: not after a going that takes someone as readily ("went to Priya", "came from Ravi", "back
#     to Marcus", "passed from Ravi to Priya"), "into", "near" ("bumped into Ravi") or "settled
#     on" ("settled on Hartley as chair"): a person again; a measure's "of" drops no name before a
#     word in lower case ("a glass of Napa Valley wine"), and "bit", "portion" are no measures
#     ("a bit of Shakespeare", "portions of Kent"); a going's place places no lone word after
#     "and" ("moved to Leeds and Priya stayed"); "scored" is no person's gesture ("Oxford scored");
#     holidays are events ("stayed through Easter" placed nothing); a phrase after "the" that
#     does what only the living do is a person ("the White Rabbit ran"); a temple, a shrine ...
#     is a building ("the Golden Temple"); a place's generic word alone is no surname before a
#     noun ("Capitol Hill ... Hill staffers"), nor ever "City", "County" ... ("Manchester City");
#     a list item's opening verb starts no name ("- [ ] Email Babbage": _IMPERATIVES).
# 25: "said Oxford scored" is no speaker (a verb after the name); "-bridge" reads as "-hill"
#     ("the chair at Cambridge"); "in" after "confided", "believed" ... places no one; "through",
#     "along" after any going place ("went through Customs"); a name eaten or drunk is a dish
#     ("ate Cold Roast"); "The White Rabbit ran." lives; the passive is no act ("The Engine was
#     described"); a role before a name is a person ("the Virgin Mary"), the sacred no one by its
#     verb ("The Holy Ghost blessed them"); a name a place's generic word ends that goes or speaks
#     is a person ("Jon Park arrived"; not a street: "Wall Street came"), the word alone its
#     short form ("Hill staffers" -> "Capitol Hill"); a note's past tense opens no name ("Met
#     Ada again."); a lone word only after "at" is an organization ("met at Google",
#     "secretary at Port"); a chunk keeps the lone words it reads as no name only for opening a
#     sentence ("Ada was ...": ``Extraction.openers``), which ``joins`` reads against a
#     document's title. Their look-alikes read as before: "through" after "went" ... places
#     only when someone goes ("Everything goes through Priya"), "along" always; only a job's, a
#     working's or a meeting's "at" says a body ("a swipe at Johnson"); a place that goes or
#     speaks is a person only with a given name first ("Capitol Hill said"); "Virgin" is a role
#     only before a name ("the Virgin Birth"); the sacred speaks as no one ("The Holy Ghost
#     said"); a person eaten stays one ("The bear ate Timothy Treadwell"); two sentences a description quotes keep their
#     boundary, a list item without a full stop given one ("Call Ada Osk on Friday. Marta Lind
#     visited ...": ``sentences.joined``). 26: a sentence a description quotes ending with a colon
#     or semicolon ends with a full stop before one it does not lead into ("Ada Osk wrote to the
#     board. Ada Osk stayed", not "board: Ada Osk stayed": ``sentences.joined``).
# 27: a sentence opening with an order before a name no verb follows starts no name ("Ask
#     Margaret about the demo.", not only a list item's), and then loses the name's honorific;
#     a word with a capital inside it is a firm's or a product's ("GitHub", "PayPal"; not "McDonald").
# 28: the shorter names a chunk resolved to a name are kept as data (``Extraction.called``), which
#     a 27 blob (main before a88308d) lacks: read as resolving none, it parted a join it made.
# 29: a line ends its sentence without a blank line under it where it is a name alone or a title
#     the next line's first word would have fitted beside (no hard wrap ended it), or where the
#     next line opens with a word of the name ending it ("Ada Lovelace" over "Ada was ..." gave
#     "Ada Lovelace Ada": ``_ends_alone``).
# 30: a line ending with a name whose word opens the next ends its sentence only where that word
#     would have fitted on it, as for a name alone, a line besides it measuring the block's width
#     (a wrap cut "... by Ford Madox" over "Ford and" into "Ford Madox": ``_ends_alone``); a
#     headline a wrap cut, each line but its last, is a headline ("Annual Report of the" over
#     "Harbour Board" gave "Annual Report": ``_cut_by_a_wrap``); a headline that is an honorific
#     and a name of two words alone is that name where its text opens a sentence with a word of
#     it alone ("Dr. Ada Lovelace" over "Ada was ..." gave no "Ada Lovelace": ``_opener_named``).
# 31: a wrap is told by a line besides the one above that a wrap may have ended, not the block's
#     last ("... and Kim Lowe" over "Kim will send ...", as wide, gave "Kim Lowe Kim"); a headline
#     of an honorific, a surname the text opens with and a verb names the surname ("Dr. Lowe
#     Resigns" gave "Lowe Resigns": ``_opener_named``); a given name before "Lane", "Hill", "Park"
#     is a person's without speaking or going ("published by John Lane" was a place); lines of
#     one shape or opening with a field's label are records, each a sentence, no headline ("Ada
#     Lovelace of London" over "Charles Babbage of Cambridge", "To: Ada Lovelace <ada@x.org>"
#     over "From: ...": ``_records``), and "ada@" is no word in lower case ("Ada" was dropped);
#     lines are measured in display columns, a wide character two (``_columns``: a Korean line
#     of 70 columns was 47 wide, and "... Ford Madox" over "Ford 이다. ..." gave "Ford Madox");
#     a line ending with a full-width stop is no headline ("作者は Ford Madox Ford である。" gave none).
#     (The verb ending a surname's headline is a listed one, _HEADLINE_VERBS: "Dr. Ada Jones" stays
#     her; a header's value folded under its label parts no headers; lines a wrap may have cut a
#     name between, "..., Charles" over "Babbage of ...", are no records.)
VERSION = "31"   # what a chunk yields; a new one re-extracts the chunks of every offline index, once

DEFAULT_TYPES = ("organization", "person", "geo", "event")
# The note closing a description of a name its chunk also said shorter ("Margaret Hollis ...
# (Also called Margaret.)"), for its readers and a search by the short name; never read back: a
# text's own words may say it too, and ``Extraction.called`` holds those names for ``joins``.
_ALSO_CALLED = " (Also called "
MAX_DESCRIPTION_WORDS = 40
MAX_RELATIONSHIPS_PER_ENTITY = 10
# A lone word capitalised this often in one chunk names a character even after "the" ("the
# Ghost", "the Spirit"); used once or twice so, it is a common noun in capitals ("the Parrot").
_EPITHET_USES = 3
_PAIR_WINDOW = 8            # a sentence listing many names pairs each only with its neighbours
_NEAR_SIDE = 6              # names per sentence considered for adjacent-sentence pairs


def _words(s: str) -> frozenset[str]:
    return frozenset(s.split())


# Capitalised adjectives begin names mid-sentence ("Poor Law", "Great Britain", "New York").
_ADJECTIVES = _words("good great little old new young poor true sure right left dear merry happy")
# Words that start sentences or quotations in capitals without being names (lower case).
_COMMON = _words("""
a about above across after afterwards again against ah ahead alas all almost along already also
although always am among an and another any anybody anyhow anyone anything anyway anywhere are
around as at aye back be because been before beforehand behind being below beside besides between
beyond both but by can cannot could dear did do does doing done down during each either else
elsewhere enough even ever every everybody everyone everything everywhere except far few first
for from further furthermore had has have having he hello her here hereafter hers herself hey
him himself his how however i if in indeed instead into is it its itself just last later least
less let like many may maybe me meanwhile might mine more moreover most mostly much must my
myself namely neither never nevertheless next no nobody none nonetheless noone nor not nothing
now nowhere o of off often oh ok okay on once one only onto or other others otherwise our ours
ourselves out over own perhaps please quite rather really said says see seldom several shall
she should since so some somebody somehow someone something sometimes somewhere soon still such
than that the their theirs them themselves then thence there thereafter thereby therefore these
they this those though through throughout thus to today together tomorrow tonight too toward
towards under unless until up upon us very via was we well were what whatever when whence
whenever where whereas wherever whether which while who whoever whole whom whose why will with
within without yes yesterday yet you your yours yourself yourselves
two three four five six seven eight nine ten eleven twelve twenty hundred thousand million
according additionally again although among amid despite following given including later
meanwhile once regarding similarly speaking thanks unlike why yesterday
eh whereat whereupon thereupon hereupon whereas anon
come go look listen mind oh pray say see tell thank well why ay nay ha hallo halloa hum humbug
bless god heaven
hurrah hurray hooray huzza huzzah bravo amen
""") | _ADJECTIVES | _words("""
à après aussi avant avec ce ces cet cette chaque chez comme dans depuis donc elles encore enfin
ensuite entre et hier ils je lorsque mais nous ou pendant plusieurs pour pourtant puis quand selon
sous sur toutefois tous toute toutes très une vous
в во на с со к ко по о об от из за у для до без при после перед через над под и а но или что как
когда где это этот эта эти он она они оно мы вы я ты вчера сегодня завтра однако также тогда
потом затем здесь там уже ещё еще даже только все всё весь вся однажды наконец кроме между его
её ее их не ни так тут теперь сейчас поэтому хотя если чтобы
""")   # French and Russian words that open sentences (not "Les", "Des", "Elle": Les Paul, Des Moines)

# Verbs a list item opens with as an order to oneself ("- [ ] Email Babbage", "- Call Ada"): the
# item's first word, no name's ("Email Babbage" was a person, and "Babbage" his short name).
# Verbs that are also first names ("Mark", "Bill", "Pat", "Sue", "Rob", "Will") are left out.
# Any sentence opening with one before a name is an order too ("Ask Margaret about the demo.")
# when no verb follows the name: an order has no subject, so the name is its object ("Read
# Hollis wrote the memo", "Ping An reported" keep their first word: ``_mention_from_run``).
_IMPERATIVES = _words("""
email e-mail call phone ring text ping message ask tell send forward reply respond answer write
draft review check confirm cancel schedule reschedule book invite remind thank pay invoice buy
order pick meet visit contact follow discuss talk update fix finish submit share sign print read
prepare plan arrange introduce return collect deliver lend borrow congratulate interview hire
give bring show help warn notify brief nudge remember
""")

# ... and their past tenses, which open a note's sentences with the subject left out ("Met Ada
# again.", "Called Bob Lin twice."): the sentence's first word, no name's ("Met Ada" was one).
_DONE = _words("""
met called emailed e-mailed phoned rang texted pinged messaged asked told sent forwarded replied
answered wrote drafted reviewed checked confirmed cancelled canceled scheduled rescheduled booked
invited reminded thanked paid invoiced bought ordered visited contacted followed discussed
talked updated fixed finished submitted shared signed printed prepared planned arranged
introduced returned collected delivered lent borrowed congratulated interviewed hired
""")

# Capitalised words that are never an entity on their own (lower case).
_NOISE = _words("""
monday tuesday wednesday thursday friday saturday sunday
mondays tuesdays wednesdays thursdays fridays saturdays sundays
january february march april may june july august september october november december
jan feb mar apr jun jul aug sep sept oct nov dec
chapter stave illustration section part volume book page figure table appendix contents
mr mrs ms miss mx dr prof sir dame messrs mme mlle madam madame
i ii iii iv v vi vii viii ix x xi xii xiii xiv xv xx
am pm ad bc ok tv
""")

# Articles, demonstratives and possessive determiners: before a lone capitalised word they make it
# a common noun ("the Parrot", "a Glee", "his Ghost"), before a name a place or a title.
_DETERMINERS = _words("a an the this that these those another every each my your his her its our their thy")
_KIN = _words("""
uncle aunt nephew niece brother sister cousin son daughter father mother wife husband friend
partner clerk grandfather grandmother
""")
_SPEECH_VERBS = _words("""
said says replied cried asked returned pursued exclaimed observed answered rejoined inquired
demanded whispered muttered continued resumed added urged interrupted remarked
""")
# What a person does and a place does not, right after the name: a person's cue as a verb of
# speech is ("Belford smiled"; "Bradford flooded" says nothing). Not "scored": a town or a
# team scores as readily as a player ("in the survey Bradford scored lowest", "Oxford scored
# against Cambridge").
_PERSON_VERBS = _words("""
smiled smiles laughed laughs nodded nods frowned frowns grinned grins winked winks sighed sighs
shrugged shrugs
""")
# What a living being does and a body, a law or a thing does not, right after a phrase after
# "the": a character's cue as speaking is ("the White Rabbit ran", "the Big Bad Wolf knocked",
# "the Cowardly Lion roared"; ``_agent``). Acting in general is none: bodies and laws act too
# ("the Red Cross delivered food", "The Poll Tax was hated"). Not those the news says of banks,
# markets, papers, teams and places as readily ("the Federal Reserve blinked", "the Dow Jones
# stumbled", "the Daily Mail screamed", "the Grand Canyon yawned", "the Big Apple sleeps", "the
# Senate bowed to pressure", "the Treasury walked away", "the economy limped", "prices crept").
_LIVING_VERBS = _PERSON_VERBS | _words("""
hurried hurries knocked knocks roared roars wept weeps sobbed sobs wailed wails
howled howls growled growls barked barks snarled snarls whimpered whimpers
tiptoed tiptoes scampered scampers scurried scurries
knelt kneels prayed prays blessed blesses
sang sings ate eats drank drinks
beckoned beckons stared stares gazed gazes glared glares sneezed sneezes giggled giggles
chuckled chuckles hugged hugs kissed kisses
""")
# ... and "ran" with a way after it ("the White Rabbit ran past Alice", "ran off") or ending the
# sentence ("The White Rabbit ran."): services, papers and campaigns run too, on time or with
# an object ("the Northern Line ran late", "the Evening Standard ran a story").
_RUNNING = _words("ran runs")   # (the ways: ``_RUN_WAYS``)
# Verbs of a story's subject that do not end in "-ed" (those that do are known by it).
_NARRATIVE_VERBS = _words("""
was is had has did does spoke speaks stood stands sat sits came comes went goes saw sees took
takes gave gives made makes held holds knew knows rose rises spread spreads led leads told tells
""")
_IRREGULAR_PLURALS = ("men", "children", "people")
# A form of "be" before a participle is the passive: what is done to a phrase after "the" ("The
# Engine was described", "the Treaty was signed") is no act of its own (``_agent``).
_BE = _words("was were is are")
_PARTICIPLES = _words("""
made told seen given taken known held found built sent written brought shown kept left lost won
sold bought paid drawn driven chosen shaken struck thrown torn worn born borne beaten broken
spoken stolen frozen forgotten hidden
""")
# ... but not what only the living feel: "The Ghost was pleased" is a character's state.
_FEELINGS = _words("""
pleased displeased frightened terrified scared startled alarmed amazed astonished surprised
delighted overjoyed disappointed ashamed embarrassed worried troubled puzzled confused bored
tired annoyed irritated offended relieved satisfied excited agitated horrified disgusted
""")
# Measures of food, drink or stuff: what follows "a piece of", "a glass of" in capitals is a
# dish or a drink ("a great piece of Cold Roast", "a glass of Bordeaux"), no entity. Not "bit",
# "portion": they take anything ("a bit of Shakespeare", "portions of Kent").
_MEASURES = _words("""
piece pieces slice slices cup cups glass glasses bottle bottles plate plates plateful
bowl bowls bowlful pound pounds pint pints loaf loaves lump lumps morsel morsels mouthful
spoonful dish dishes joint joints helping helpings jug jugs mug mugs jar jars
barrel barrels cask casks keg kegs quart quarts gallon gallons ounce ounces serving servings
""")
# ... and so does eating or drinking it ("Kim Lowe ate Cold Roast", "drank Bordeaux").
_EATING = _words("ate eat eats eating eaten drank drink drinks drinking sipped sips gulped devoured munched nibbled")
# Heads of a building or an institution a plural's possessive names ("the Fishermen's Guild",
# "the Children's Hospital"); a building's name is a place ("the Mansion House", "the Lantern Hall").
_BUILDING_HEADS = _words("""
house hall palace castle abbey cathedral chapel tower theatre theater inn tavern hotel asylum
prison gaol workhouse mill market arcade gate temple mosque synagogue shrine pagoda mausoleum
tomb monument stadium arena mahal
""")
_INSTITUTION_HEADS = _BUILDING_HEADS | _words("""
guild union society association party club league church hospital school college institute
fund bank court home
""")
# Greetings capitalise their adjective: "Merry Christmas" and "A Happy New Year" are the holiday.
_GREETINGS = _words("merry happy")

# Dropped before a name; the bare name is the entity.
_HONORIFICS = HONORIFICS
# Kept as part of the name (see the module notes).
_KEEP_TITLES = _words("""
mrs miss lady mme mlle madame madam frau dame
president king queen prince princess lord duke duchess earl count countess baron baroness
emperor empress pope bishop archbishop cardinal father brother sister saint
captain capt general gen colonel col major lieutenant lt sergeant sgt admiral commander
senator sen governor gov mayor judge justice chancellor minister premier
uncle aunt master
""")
# Heads of a phrase in capitals after "the" that name someone by role or kind: titles, kin and
# these ("the Dalai Lama", "the Wise Men", "the Chief Constable"), and agent nouns by their
# ending (``_AGENT_ENDINGS``: "the Artful Dodger", "the Unknown Soldier"). Any other head names a
# thing, an idea or a body ("the Holy Spirit", "the Red Cross", "the Poll Tax"; ``_person_head``).
_PERSON_HEADS = _KEEP_TITLES | _KIN | _words("""
lama constable chief knight monk nun priest abbot abbess vicar rabbi imam guru sultan khan shah
tsar czar pharaoh caliph emir raja rajah maharaja heir regent pilgrim prophet apostle messiah
man men woman women boy girl child children lad lass maid maiden bride groom widow orphan giant
hermit poet bard sage wizard witch fool people folk
""")
_AGENT_ENDINGS = ("er", "or", "ist", "ian", "man", "men")
# Roles that stand before a name as a title does ("the Virgin Mary", "the Prophet Elijah", "the
# Widow Douglas"): a phrase after "the" of one of these and one word is a person. Not those that
# are adjectives too, or stand before a kind as well ("the Giant Panda", "the Boy Scouts"); "virgin"
# is an adjective too ("the Virgin Birth"), a role only before a name (``_person_head``).
_ROLES_BEFORE_NAMES = _words("virgin prophet prophetess apostle evangelist widow")   # not "the Hermit Kingdom"
_ABBREVIATIONS = _words("""
mr mrs ms mx dr prof st mt ft rev gen col capt lt sgt gov sen rep jr sr co inc ltd corp
vs etc e.g i.e a.m p.m u.s u.k fig vol
""")

# Lower-case words that may join capitalised words inside one name.
_PARTICLES = _words("van von der den de du da di del della la le ten ter bin al el y zu")
# ... and the prefixes a surname or a given name glues to a capital ("McDonald", "MacArthur",
# "FitzGerald", "VanderMeer", "DeShawn", "LeBron", "DiCaprio", "JaVale"): no firm's capital inside a word.
_GLUED_PREFIXES = _PARTICLES | _words("mc mac fitz vander st o ja ka ke sha ta")
# ... and those a surname glues that a firm's name may open with as well ("AbuBakr", "DosSantos",
# "IbnSaud", "BenAri"): a person's capital only in a name opening with a given name (``_resolve``).
_SURNAME_GLUES = _words("abu abd abdel abdul ibn ben bint bar dos das des ap ab ould")
# Degrees after a person's name ("Kim Lowe PhD"), whose capitals inside say no firm.
_DEGREES = _words("phd edd psyd dphil mphil dsc msc bsc meng beng mres mst pharmd drph thd dmin llb llm lld")
# German capitalises every noun, so a capital there says little (see the module notes). A chunk
# is German when these words (none of them common in English) make up enough of it.
_DE_FUNCTION = _words("""
der die das den dem des und ist nicht mit von zu ein eine einen einem einer eines sich auf für
im sind wurde wird auch bei nach aus noch nur über oder aber dass daß er sie es wir ich haben
werden zum zur vom beim ins kein keine seine ihre sein ihr als wie vor bis wenn dann denn doch
weil sehr viel viele mehr wieder schon immer hier dort nun ob seit durch gegen ohne unter
zwischen sowie wurden waren hatte hatten kann können muss soll sollen diese dieser dieses jedoch
uns ihm ihn ihnen
""")
# Share of the words; written English has next to none of them (synth_small, A Christmas Carol:
# at most 0.1%), German text 12% and more even when counting lower-case ASCII words only.
_DE_SHARE = 0.06
# Counted: not the name particles, nor French "des", Spanish "es"; "der", "den", "dem" only
# where no "von"/"van" makes them a name's ("Ursula von der Leyen" in English text), and once
# ("dem", no particle, was a marker as well as an article: counted twice).
_DE_ARTICLES = ("der", "den", "dem")
_DE_MARKERS = _DE_FUNCTION - _PARTICLES - _words("des es") - frozenset(_DE_ARTICLES)
_NAME_ARTICLES = ("von der ", "von den ", "von dem ", "van der ", "van den ", "van dem ")
# Before a German noun: articles, their contractions with a preposition, demonstratives and
# possessives. A word after one is a noun, not a name ("den Präsidenten", "am Montag").
_DE_DETERMINERS = _words("""
der die das den dem des ein eine einen einem einer eines kein keine keinen keinem keiner keines
im am zum zur vom beim ins ans aufs dieser diese dieses diesen diesem jeder jede jedes jeden
jedem sein seine seinen seinem seiner seines ihr ihre ihren ihrem ihrer ihres mein meine meinen
meinem meiner unser unsere unseren unserem unserer euer eure
""")
# In German only these join a name ("Ursula von der Leyen", "Karl-Theodor zu Guttenberg"); an
# article between two nouns ("den Präsidenten der Bundesbank") joins nothing.
_DE_PARTICLES = _words("von zu van de")
# ... but "zu" before these is a preposition ("kommt Hans zu Besuch").
_DE_ZU_NOUNS = _words("hause haus besuch fuß ende beginn gast hilfe recht tode lande wasser mittag abend")
# Capitalised counts before a noun ("Tausende Menschen").
_DE_COUNTS = _words("hunderte tausende zehntausende hunderttausende dutzende millionen milliarden")
# Sentence openers that are no name's first word ("Wer Hinweise hat", "Laut Polizeisprecher ...").
_DE_OPENERS = _words("""
wer wen wem wessen wie wo wann warum weshalb weil wenn als dann danach dort hier heute gestern
morgen später laut trotz während seit bis doch denn jedoch also auch immer jetzt nun schon
mit für nach aus bei ohne über unter gegen um durch vor hinter neben zwischen wegen in an auf
""")
# Before a lone word these say "noun" as an article does: "mit Kaffee", "nach Hause".
_DE_PREPOSITIONS = _words("""
mit für nach aus bei ohne über unter gegen um durch seit von zu vor hinter neben zwischen wegen
trotz während in an auf
""")
# A German title is a compound ending so ("Bundespräsident", "Polizeisprecherin"); before a full
# name it goes, as the surname alone then resolves to the full name.
_DE_TITLE_ENDINGS = tuple(e + f for e in ("präsident", "kanzler", "minister", "sprecher", "chef",
                                          "direktor", "meister", "vorsitzende", "leiter")
                          for f in ("", "in"))
# A capitalised adjective in German is part of a name ("die Deutsche Bank", "der Europäischen
# Zentralbank"): nouns do not end so.
_DE_ADJECTIVE = re.compile(r"(?:isch|lich|deutsch)(?:e|en|er|es|em)$")
_OF_HEADS = _words("""
bank ministry department university institute college school academy council union board
office bureau agency commission committee authority foundation society association federation
league church museum court house hall order republic kingdom state states province isle
isles gulf bay cape lake port city county duchy prince princess king queen duke earl lord
lady ghost spirit secretary minister governor president chancellor chamber center centre
school society friends sisters brothers knights guild army navy corps people party
""")
# The word lists ``joins`` reads as well, by these public names: it tells a person's own name
# from a title or a role as the extractor does. A change to one changes which names join, so it
# bumps ``joins.RULE`` as well as ``VERSION``.
KEEP_TITLES = _KEEP_TITLES
ADJECTIVES = _ADJECTIVES
KIN = _KIN
OF_HEADS = _OF_HEADS
PARTICLES = _PARTICLES

_ORG_WORDS = _words("""
inc ltd llc plc corp corporation co company companies authority university institute college
school academy council union ministry department bank bancorp foundation group press commission
committee board office bureau agency consortium holdings logistics energy media semiconductors
systems technologies technology industries partners capital airlines airways motors labs
laboratories pharmaceuticals trust association society federation league club party church guild
museum hospital court parliament congress senate army navy police service services network
solutions communications insurance fund exchange times news post journal gazette herald tribune
broadcasting records studios shipping mining petroleum oil gas power utilities telecom robotics commerce
dynamics analytics software electronics biotech therapeutics foods alliance coalition
organisation organization cooperative co-operative enterprises ventures investments securities
financial bancshares brands pictures publishing publishers airline railway railways
partei verband gesellschaft stiftung verein ministerium gericht universität kommission akademie
bahn
banque société compagnie ministère université assemblée
""")
# German compounds naming a body at the end of a longer name ("Europäische Zentralbank").
_DE_ORG_ENDINGS = ("zentralbank", "landesbank", "partei", "verband", "gesellschaft", "ministerium",
                   "gericht", "stiftung", "verein", "kommission", "behörde", "institut")
# German bodies named by one noun, with its article ("der Bundestag").
_DE_BODIES = _words("bundesbank bundestag bundesrat bundesregierung bundeswehr bundesverfassungsgericht")
_ORG_WORDS |= _DE_BODIES
_EVENT_WORDS = _words("""
summit festival strike conference election elections fair talks marathon flood floods collapse
forum war christmas year night olympics games cup championship championships expo exhibition convention
symposium treaty accord riot riots protest protests revolution crisis earthquake hurricane fire
disaster ceremony awards gala parade carnival tournament race regatta rally day eve week
scandal spill blackout outbreak massacre battle siege referendum hearing trial meeting concert
workshop congress-meeting uprising rebellion pandemic epidemic famine drought storm
""")
# Holidays: "stayed through Easter" is a time, no place (Christmas is one above). An event word
# only when it is the whole name (``_cue_type``): people bear them as surnames too ("George
# Yule", "Tom Easter", "Sarah Lent"), so a name ending in one is no holiday by that alone.
_HOLIDAYS = _words("""
easter lent advent epiphany pentecost whitsun whitsuntide michaelmas candlemas halloween yule
yuletide hogmanay thanksgiving ramadan eid diwali deepavali holi navratri vesak hanukkah
chanukah passover purim sukkot kwanzaa
""")
_EVENT_WORDS = _EVENT_WORDS | _HOLIDAYS
_GEO_SUFFIXES = _words("""
falls harbor harbour city street road avenue lane square vale valley river lake county heights
crossing bay beach island islands isle mountains mountain hills hill springs point coast
peninsula sea ocean gulf canal province region district territory desert forest park
churchyard bridge station quay wharf creek sound strait straits highlands lowlands plains
township borough village town
""")
_GEO_PREFIXES = _words("lake port new mount mt fort ft saint st san santa cape north south east west upper lower")
# Of _GEO_SUFFIXES, those that are surnames too ("Tom Hill", "Lois Lane"): alone, such a word
# may be a person's surname (``_resolve``); "City", "County", "Station" ... never are.
_GEO_SURNAMES = _words("hill hills lane park bay beach lake street forest bridge vale")
# Of those, the ones a given name opens more often as a person's than as a place's ("John Lane",
# "Tom Hill", "Grace Park"; "Victoria Park" is rarer, and mostly after "in" or "at", which keep
# the place): such a name is a person's without speaking or going (``_resolve``), where "John
# Lane published the book" was a place. Not "Bridge", "Bay" ...: "Charles Bridge", "Albert Bridge".
_GIVEN_SURNAMES = _words("hill lane park")
# Common given names: before a place's generic word ("Jon Park", "Tom Hill") they say the name a
# person's when it goes or speaks, as "Capitol Hill said", "Jurassic Park came out", "Notting
# Hill went on to gross" do not (``_resolve``). A short list, no gazetteer: another person's cue in
# the chunk does as well.
_FIRST_NAMES = _words("""
aaron adam adrian aidan alan albert alex alexander alice alfred amy andrew andy angela ann anna
anne anthony arthur ben benjamin beth bill billy bob brian carl carol caroline catherine charles
charlie chloe chris christine christopher claire daniel david dan diane dominic donald dorothy
ed edward eleanor elizabeth ellen emily emma eric frank fred gary george grace graham harry
helen henry ian jack jake james jane janet jason jean jeff jennifer jenny jess jessica jill jim
jimmy jo joan joe john jon jonathan joseph josh julia julie karen kate katherine kathy keith
kevin kim laura lee leo linda lisa liz louise lucy luke margaret maria mark martin mary matt
matthew michael mike nancy neil nick nicola oliver pat patricia paul peter phil rachel ray
richard rob robert roger ruth ryan sam sarah scott sean simon sophie stephen steve sue susan
thomas tim timothy tom tony victoria will william
ahmed ali ana carlos chen fatima hans hiroshi ivan jose juan li luis maria mohammed muhammad
olga pierre priya raj ravi sergei wei yuki zofia
""")
# Past tenses of verbs that do not end in "-ed" and modals, beside _NARRATIVE_VERBS ...: the
# word after a name is a verb, not a noun the name qualifies ("Hill won", not "Hill staffers").
_IRREGULAR_VERBS = _words("""
won lost left got put set met felt kept began wrote sent spent built brought thought bought caught
fought taught found paid heard read meant became broke chose drew drank ate fell beat grew hid hit
hurt let lay laid quit rode rang sang sank shook shot shut slid sold stole struck swore swam threw
tore understood wore drove flew fled ran would wouldn't will won't can can't cannot may might must
""")
# "Hill alone voted no", "said Ruvford upstairs" (adverbs without "-ly")
_NO_NOUNS = _words("alone away twice thrice upstairs downstairs indoors outdoors overseas afterwards")
# Endings of a place's one-word name, most of them a word for a place grown onto it; a weak cue:
# surnames end so too (``_place_word``). A person's cue in the chunk beats them ("Ms. Belford").
_GEO_WORD_ENDINGS = ("ford", "mouth", "ville", "burgh", "burg", "shire", "borough", "chester",
                     "caster", "minster", "stadt", "grad", "polis", "chapel")
# Endings as common in surnames as in places (Cornhill, Highgate, Greenwich, Canterbury, Cambridge;
# Churchill, Southgate, Ashbury, Sandwich, Bainbridge): a place only where the chunk also puts a place's
# preposition before the word ("on Cornhill"; ``_Mention.locus``). Read as the endings above, a
# lone word so ended was a place wherever the chunk lacked the surname's full name: a biography
# naming "Harold Ashbury" once gave a place "Ashbury" in every later chunk ("Whitechapel": no
# surname ends in "-chapel").
_SURNAME_PLACE_ENDINGS = ("hill", "gate", "wich", "bury", "bridge")
_GEO_KNOWN = _words("""
africa america americas antarctica asia australia europe oceania arctic atlantic pacific
afghanistan argentina austria bangladesh belgium bolivia brazil bulgaria canada chile china
colombia croatia cuba denmark egypt england ethiopia finland france germany ghana greece hungary
iceland india indonesia iran iraq ireland israel italy jamaica japan jordan kenya korea lebanon
libya mexico morocco nepal netherlands nigeria norway pakistan peru philippines poland portugal
romania russia scotland serbia singapore spain sudan sweden switzerland syria taiwan thailand
turkey uganda ukraine venezuela vietnam wales yemen zimbabwe britain
london paris berlin rome madrid lisbon vienna prague warsaw moscow athens dublin edinburgh
amsterdam brussels geneva zurich stockholm oslo copenhagen helsinki istanbul cairo nairobi
lagos johannesburg delhi mumbai beijing shanghai tokyo seoul sydney melbourne toronto
montreal vancouver chicago boston washington york california texas florida
us usa uk uae eu
deutschland frankreich österreich schweiz italien spanien russland polen europa amerika ungarn
tschechien niederlande belgien dänemark schweden norwegen finnland griechenland türkei brasilien
kanada indien ägypten
münchen köln frankfurt stuttgart düsseldorf dresden leipzig hannover bremen nürnberg bonn
heidelberg brüssel wien genf bern prag
""")
_GEO_KNOWN_MULTI = frozenset({
    "united states", "united kingdom", "new york", "great britain", "city of london",
    "new zealand", "south africa", "hong kong", "los angeles", "san francisco", "new delhi",
    "saudi arabia", "north america", "south america", "latin america", "middle east"})
_DEMONYMS = _words("""
english french dutch spanish welsh scottish irish british german italian american european
chinese japanese russian greek roman latin christian jewish muslim catholic protestant
african asian indian arab arabic persian turkish polish swedish danish norwegian
""")
# "at" and "around" are left out: "smiled at Fred", "looked around Scrooge".
_GEO_PREPOSITIONS = _words("in near across throughout outside inside within into à в во")
# Prepositions before a place, wider than _GEO_PREPOSITIONS (which alone make any word a place),
# for a word ending as places do (``_locus_before``): "at", "on", "through", "along", "beyond"
# not after a word that takes a person ("looked at Crawford", "looking at Ravi", "angry at
# Tom", "relied on Ashbury"); "to", "from", "past", "around" only after a way or a going
# ("walked from Highgate", "the train to Ipswich", "drove past Greenwich", "walked around
# Highgate"; not "according to Southgate", "loyal to Ashbury", "a letter from Ashbury", "ran
# past Woodgate", "gathered around Ashbury").
_AT_PREPOSITIONS = _words("at on through along beyond")
_WAY_PREPOSITIONS = _words("to from toward towards via past around")
_PERSON_BEFORE_PREPOSITION = _SPEECH_VERBS | _words("""
look looks looked stare stares stared glance glanced smile smiled laugh laughs laughed nod
nodded wave waved point pointed shout shouted call called rely relies relied depend depends
depended wait waited frown frowned spy spied gaze gazed dote doted count counted insist
insisted turn turned glare glared grin grinned wink winked yell yelled scream screamed sneer
sneered scowl scowled jeer jeered hiss hissed swear swore growl growled
looking staring glancing smiling laughing nodding waving pointing shouting frowning gazing
glaring grinning winking yelling screaming sneering scowling jeering hissing growling
angry furious mad annoyed
""")
_GOING = _words("""
go goes going gone went come comes coming came move moves moving moved travel travels
travelling traveling travelled traveled walk walks walking walked drive drives driving drove
driven ride rides riding rode fly flies flying flew sail sails sailing sailed head heads
heading headed return returning journey journeyed flee fled escape escaped emigrated
migrated spread spreads commute commuted march marches marched marching way road roads route routes train trains bus buses coach
ferry flight flights journey trip miles mile back home north south east west
""")
# Goings that take someone as readily as a place ("went to Ravi", "came from Priya", "gave it
# back to Marcus", "came home to Sam", "made his way to Marcus"): their "to", "from" place a
# word ending as places do ("went to Highgate"), not any lone word (``_locus_before``: "to").
_GOING_TO_ANYONE = _words("go goes going gone went come comes coming came back home way")
# ... of them, those whose "through" passes someone's hands as readily ("Everything goes through
# Priya", "All approvals went through Marcus"): a place's only when someone goes (``_goer_before``).
_GOING_TO_SOMEONE = _words("go goes going gone went come comes coming came")
_GOERS = _words("i we you he she they")
# ... and the ways and vehicles that go through places, never through someone's hands ("The road
# goes through Tarnwick", "The train went through Tarnwick").
_WAYS_THROUGH = _words("""
road roads route routes path paths railway railways line lines track tracks trail trails highway
motorway street tunnel canal train trains bus buses coach ferry ship ships convoy army troops
procession parade
""")
_AUXILIARIES = _words("was were is are am had has have be been will would did does do")
_GOER_ADVERBS = _words("all both then also just soon later finally eventually once never")
# ... those between a subject and its verb ("Ring Lardner never wrote", not "all": "Tell Ann Lo
# all details"), and modals _IRREGULAR_VERBS lacks (``_verb_beyond``)
_SUBJECT_ADVERBS = _GOER_ADVERBS - {"all", "both"} | _words("not still already often always ever")
_MODALS = _words("could should shall")
# Bare verbs _verb_form knows, some past tenses too ("Help Ada and Bo set up", "Help Ada and Bo
# stay"): no past tense after names listed (``_finite_past``).
_BARE_VERBS = _words("beat hit hurt lay let put quit read set shut spread arrive land dock stop stay live")
# Words ending "-ed" as a past tense does that are none: bare verbs ("Help Ada and Bo succeed"),
# nouns and adjectives ("Give Ada and Bo seed funding", "red pens") (``_finite_past``).
_ED_NO_PAST = _words("""
need feed seed speed breed bleed heed weed exceed proceed succeed embed shred
bed red sled greed creed deed steed reed tweed
""")
# Words ending as a verb's "-ing" does that are prepositions or pronouns, no verb of a name
# before them ("Call Ada Osk, the clerk, during the break", "Ask Ada Osk anything").
_ING_NO_VERBS = _words("""
during according regarding concerning including excluding following pending notwithstanding
anything something nothing everything
""")
# Of _GEO_PREPOSITIONS, those that take someone as readily ("bumped into Ravi", "sat near
# Priya"): a place's cue by most mentions as ever, not by one (``_locus_before``: "near").
_NEAR_PREPOSITIONS = _words("into near")
# Before "in", these take someone, no place ("confided in Priya", "believed in Ravi", "her
# faith in Marcus"): their "in" is no place's (``_prep_before``, ``_locus_before``). In lower case
# only: "the National Trust in Devon" places Devon.
_IN_SOMEONE = _words("""
confide confides confided confiding believe believes believed believing trust trusts trusted
trusting faith confidence
""")
# ... but a trust is a body too ("a family trust in Guernsey", "offshore trusts in Jersey"): the
# noun takes someone only after a pronoun, its possessive or "to" ("their trust in Ravi", "I
# trust in Ravi", "learned to trust in Ravi").
_TRUST = _words("trust trusts")
_TRUSTING = _words("i we you they he she my your his her its our their to")
# Before "at", a job or a working, studying or meeting: a lone word only ever after such an "at"
# is a body's ("secretary at Port", "worked at Ruvtane", "met at Google"; ``_at_a_body``); after
# any other "at" it may be anyone's as readily ("took a swipe at Johnson", "threw a glass at Marcus").
_AT_A_BODY = _words("""
met meet meets meeting worked work works working studied study studies studying employed
interned intern interns job jobs post position role career staff colleague colleagues
secretary secretaries editor editors director directors manager managers engineer engineers
analyst analysts executive executives chair chairman chairwoman president partner partners
employee employees intern student students professor professors lecturer lecturers
researcher researchers scientist scientists officer officers head clerk clerks treasurer
accountant accountants consultant consultants associate associates fellow fellows developer
developers designer designers reporter reporters correspondent correspondents founder
cofounder co-founder ceo cfo cto coo vp lawyer lawyers economist economists organiser
organisers organizer organizers spokesperson spokesman spokeswoman teacher teachers
taught teach teaches teaching lectured lecturing trained hired volunteered nurse nurses doctor
doctors surgeon surgeons physician physicians
""")
# Between a working and its "at": "worked there at Ruvtane", "worked for years at Ruvtane".
_AT_ADVERBS = _words("there here briefly later also still once then for years months decades")
_OBJECTS = _words("me him her us them you")
# Before "at", "on", "through" ... these say the place one comes to or stays in ("docked at
# Sausalito", "stayed at Hampstead"), as a going does.
_ARRIVING = _words("""
arrive arrives arrived arriving land lands landed landing dock docks docked docking stop stops
stopped stay stays stayed staying live lives lived living
""")
# Goings and arrivals as verbs after their subject: what people do and places do not ("Jon
# Park arrived", "Jon Park walked home"; ``_resolve``). Not staying, living, stopping: places
# do those ("Hyde Park stayed open"), nor the nouns among the goings ("way", "train").
_MOVING = _words("arrive arrives arrived arriving") | _GOING - _words("""
way road roads route routes train trains bus buses coach ferry flight flights journey trip miles
mile back home north south east west spread spreads head heads heading headed return returning
""")

_PREPOSITIONS = TITLE_SMALL - _words("a an the and but or nor for so yet as if than vs v versus")
_HEADLINE_SMALL = TITLE_SMALL | _PARTICLES
_HEADLINE_COMMON = _COMMON | _PARTICLES
# The ways a being runs that a line, a road or a river does not ("ran through Camden", "ran along
# the river", "ran into the sea" are said of those too).
_RUN_WAYS = _words("away off home back past after toward towards")   # after "ran" (``_RUNNING``)

_TYPE_SYNONYMS = {
    "person": _words("person people per persons character characters individual human"),
    "organization": _words("organization organisation organizations organisations org company "
                           "companies institution institutions agency"),
    "geo": _words("geo location locations place places gpe loc city country region"),
    "event": _words("event events"),
}

# --- regular expressions (compiled once) ---

_BLOCK_SPLIT = re.compile(r"\n[ \t\r\f\v]*\n")
# A fenced code block (``` or ~~~), to its closing fence or, cut off by the chunk, to the end:
# code is not prose, and a name printed in it describes nothing.
_CODE_FENCE = re.compile(r"^[ \t]*(```|~~~).*?(?:^[ \t]*\1[ \t]*$|\Z)", re.MULTILINE | re.DOTALL)
_SPACES = re.compile(r"\s+")
# A word: letters and digits, joined by single apostrophes or hyphens ("O'Brien",
# "Christmas-time", not "Eve--old"), with an optional possessive ending.
_WORD = re.compile(r"[^\W_]+(?:['\u2019\-][^\W_]+)*(?:['\u2019]s?)?")
# Combining diacritics, which composed text (NFC) still holds where a letter has no precomposed
# form with its marks (Yoruba "ẹ́", "ọ̀": "Olúwaṣẹ́un" was "Olúwaṣẹ" and "un"); in a chunk holding
# one, a word is read with them (``_MARKED_WORD``: slower, so only there).
_MARKS = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
_MARK = re.compile(f"[{_MARKS}]")
_MARKED_WORD = re.compile(rf"(?:[^\W_][{_MARKS}]*)+(?:['\u2019\-](?:[^\W_][{_MARKS}]*)+)*(?:['\u2019]s?)?")
_CAMEL_PART = re.compile(r"[^\W\d_][^\W\d_A-Z]*")   # "Ann" of "JoAnn" (``_inner_capitals``)
_PART_BREAK = re.compile(r"['\u2019\-]")   # where a double-barrelled name's parts meet (``_inner_capitals``)
# (not an e-mail address's user: "Ada" of "To: Ada Lovelace <ada@x.org>" was dropped as a word
# the chunk writes in lower case; a user is 64 characters at most, and looking further made text
# of dotted words, "a.b.c...", quadratic: 40,000 characters took 2.7 s, where 0.02)
_LOWER_WORD = re.compile(r"(?<![\w'\u2019\-])[a-z][a-z\-]*(?![\w.+\-]{0,64}@)")
# a word with a letter beyond ASCII ("déjà", "вчера")
_WIDE_WORD = re.compile(r"(?<![\w'\u2019\-])[^\W\d_]*[^\x00-\x7f\W\d_][^\W\d_]*(?:-[^\W\d_]+)*")
_WIDE_LETTER = re.compile(r"[^\x00-\x7f\W\d_]")
# (Never starting inside a run of stops or dashes, and never giving back what a run took: 200,000
# dashes in a file took 88 s, each start in the run scanning on to its end. The first character
# is read before the look behind, so the search skips to the next stop or dash as a character
# set: a look behind first made it try every position, a third of the extractor's time.)
_SENTENCE_END = re.compile(r"([.!?\-\u2014](?:(?<=[.!?])(?<![.!?]{2})[.!?]*+|(?<=-)(?<!--)-++(?=[\"'\u201d\u2019])"
                           r"|(?<=\u2014)(?=[\"'\u201d\u2019])))([\"'\u201d\u2019)\]]*+)\s+")
_CONTRACTION = re.compile(r"['\u2019](?:ll|d|m|ve|re|t)$|n['\u2019]t$", re.IGNORECASE)
_OPEN_QUOTE = frozenset("\"'\u201c\u2018([")
# After one and a space, a word is capitalised as a first one: "|" opens a table's cell.
_CLAUSE_MARKS = ":;\u2014|"
# A quote or a colon: only in a sentence with one may a word after its first begin (``_initial_indexes``).
_INITIAL_MARK = re.compile("[" + re.escape("".join(sorted(_OPEN_QUOTE)) + _CLAUSE_MARKS) + "]")
_DATELINE = re.compile(r"^[A-Z][A-Z .'\-]+,[^\u2014]{0,40}?\s(?:\u2014|--)\s+")
_HEADING_MARK = re.compile(r"^\s*(#{1,6}\s+|\*\*|__)")
_ATX_HEADING = re.compile(r"#{1,6}\s")   # a Markdown heading line ("#tag" is none)
_YEAR = re.compile(r"[12]\d{3}")
# A Markdown line's marks: quotes (kept out), then a list item's bullet or number, its task box
# or a callout's [!type] (group 1: the line begins an item of its own).
_LINE_MARK = re.compile(r"[ \t]*(?:>[ \t]?)*[ \t]*((?:[-*+]|\d{1,3}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?|\[![\w-]+\][+-]?[ \t]*)?")
_NUMBER = re.compile(r"\d+")
# Not a name but code, a key or base64: a digit against a letter ("Config277", "xK9fQ2"), or
# two camel humps ("loadDataFromFile"); one hump is a name's ("McDonald", "YouTube").
_IDENTIFIER = re.compile(r"[^\W\d_]\d|\d[^\W\d_]|[a-z][A-Z][^\W_]*?[a-z][A-Z]")
_TRAILING = ".,:;!?\"')]\u201d\u2019"   # punctuation a word of a line may carry after it
_APOSTROPHES = "'\u2019"
_POSSESSIVE_CHARS = "sS'\u2019"


# A word of a sentence, as a plain tuple (a chunk has thousands; a tuple is made the fastest):
# its text (a possessive's ending cut), where it starts and ends in the sentence (the ending
# included), whether it is capitalised, ALL-CAPS, a possessive, and a plural's possessive.
_Token = tuple[str, int, int, bool, bool, bool, bool]
_TEXT, _START, _END, _CAP, _CAPS, _POSS, _PLURAL_POSS = range(7)


def _tokens(sentence: str, word: re.Pattern = _WORD) -> list[_Token]:
    """The words of a sentence. The hot loop of the module: one pass per word, cheap tests first."""
    out: list[_Token] = []
    append = out.append
    find = sentence.find
    end = 0
    for w in word.findall(sentence):
        # Where the word starts: its first occurrence after the last word, as nothing between
        # two words can begin one (a match object per word cost more than the rest of this loop).
        start = find(w, end)
        end = start + len(w)
        poss = plural_poss = False
        if w[-1] in _POSSESSIVE_CHARS and len(w) > 2:
            if w[-1] in _APOSTROPHES:           # "Workers'": a plural's possessive
                w = w[:-2] if w[-2] in _APOSTROPHES else w[:-1]
                poss, plural_poss = True, w[-1] in "sS"
            elif w[-2] in _APOSTROPHES:         # "Scrooge's"; "Fishermen's", a plural's
                w = w[:-2]
                poss, plural_poss = True, w.lower().endswith(_IRREGULAR_PLURALS)
        if not w[0].isupper():                  # most words: no capital, nothing more to test
            append((w, start, end, False, False, poss, plural_poss))
            continue
        cap, caps = _capitalised(w)
        append((w, start, end, cap, caps, poss, plural_poss))
    return out


@functools.lru_cache(maxsize=1 << 14)
def _capitalised(w: str) -> tuple[bool, bool]:
    """Whether a word with a capital is capitalised (no contraction, no code: "Don't", "Config277",
    no word drawn out in speech: "Scro-o-o-o-oge") and whether it is ALL-CAPS. Remembered: a
    chunk's names recur, and so do a corpus's (a function of the word alone, so nothing carries
    from one chunk to another but time)."""
    cap = not (("'" in w or "\u2019" in w) and _CONTRACTION.search(w)) and not _IDENTIFIER.search(w) \
        and not ("-" in w and _drawn_out(w))
    return cap, cap and len(w) > 1 and w.isupper()


def _drawn_out(w: str) -> bool:
    """Whether a hyphened word is drawn out in speech: two small letters alone between hyphens
    ("Scro-o-o-o-oge", "No-o-o-o"), in any alphabet; not initials ("A-B-C", "А-Б-В"), which are
    capitals, nor a caseless script's syllables."""
    inner = w.split("-")[1:-1]
    return any(len(a) == 1 == len(b) and a.islower() and b.islower() for a, b in zip(inner, inner[1:]))


class _Mention:
    __slots__ = ("sent", "name", "honorific", "title", "prep", "poss", "acronym", "det", "agent", "initial",
                 "speaks", "the", "locus", "measure", "qualifies", "goes")

    def __init__(self, sent: int, name: str, *, honorific: bool = False, title: bool = False,
                 prep: bool = False, poss: bool = False, acronym: bool = False, det: bool = False,
                 agent: str = "", initial: bool = False, speaks: bool = False, the: bool = False,
                 locus: str = "", measure: str = "", qualifies: bool = False, goes: bool = False) -> None:
        self.sent, self.name = sent, name
        self.honorific, self.title, self.prep, self.poss = honorific, title, prep, poss
        self.acronym, self.det, self.initial = acronym, det, initial
        self.agent = agent          # "speaks", "lives" or "acts" right after "the" (``_agent``), or ""
        self.speaks = speaks        # beside a verb of speech: "Ruvford said", "said Ruvford"; "Ashford nodded"
        self.the = the              # right after "the": "the Invisible World"
        self.locus = locus          # the place's preposition before it: "on" for "on Cornhill" (``_locus_before``)
        self.measure = measure      # "of" after a measure's "of", "eaten" after eating: "a piece of Cold Roast", "ate Cold Roast"
        self.qualifies = qualifies  # before a noun it qualifies: "Hill staffers", "City fans" (``_noun_at``)
        self.goes = goes            # before a going or an arrival: "Jon Park arrived" (``_MOVING``)


def extract_offline(chunk_text: str, *, entity_types: list[str] | None = None) -> Extraction:
    """Entities and co-occurrence relationships of one chunk, found without a model."""
    if not chunk_text or not isinstance(chunk_text, str):
        return Extraction()
    word = _WORD
    if not chunk_text.isascii():
        # One name however its accents were typed: "Zoë" as one character or as "e" and a
        # combining mark (NFD, as macOS names files) was "Zoë" here and "Zoe" there.
        chunk_text = unicodedata.normalize("NFC", chunk_text)
        if _MARK.search(chunk_text):
            word = _MARKED_WORD
    sentences, blocks, headlines, rows, items = _sentences(chunk_text)
    if not sentences:
        return Extraction()
    lows = _LOWER_WORD.findall(chunk_text)
    lower_words = set(lows)
    if not chunk_text.isascii() and _WIDE_LETTER.search(chunk_text):
        # "вчера", "déjà": lower-case words of other alphabets
        lower_words.update(w for w in _WIDE_WORD.findall(chunk_text) if w[0].islower())
    tokens = [_tokens(s, word) for s in sentences]
    initial = [_initial_indexes(s, toks) for s, toks in zip(sentences, tokens)]
    mid_caps = {t[_TEXT] for i, toks in enumerate(tokens) if i not in headlines
                for j, t in enumerate(toks) if t[_CAP] and j not in initial[i]}
    de = _german_nouns(sentences, tokens, _german_hits(chunk_text, lows))

    mentions: list[_Mention] = []
    skipped: list[str] = []     # (``Extraction.openers``)
    for i, toks in enumerate(tokens):
        if i not in headlines:
            mentions.extend(_sentence_mentions(i, sentences[i], toks, initial[i], lower_words, mid_caps, de,
                                               item=i in items, skipped=skipped))
    openers = sorted(set(skipped))
    if headlines:
        # A title that is a person's name alone, over text that says a word of it alone only
        # where a sentence opens ("Dr. Ada Lovelace" over "Ada was ..."), is that name: as a
        # headline it gave none, the text saying no name it holds.
        # (its honorific and that word alone, where a verb follows: "Dr. Lowe Resigns")
        said = frozenset(skipped)
        named = {i: k for i in sorted(headlines) if said and (k := _opener_named(sentences[i], tokens[i], said))}
        for i, k in named.items():
            toks = tokens[i][:k]
            mentions.extend(_sentence_mentions(i, sentences[i][:toks[-1][_END]], toks, initial[i], lower_words,
                                               mid_caps, de))
        mentions.extend(_headline_mentions(sentences, headlines - set(named), {m.name for m in mentions}))
    if not mentions:
        return Extraction(openers=openers)

    targets, types = _resolve(mentions, lower_words, german=de is not None)
    resolved = [(m, target) for m, target in zip(mentions, targets) if target in types]
    if not resolved:
        return Extraction(openers=openers)
    allowed = _allowed_types(entity_types)
    # Dicts keep insertion order: names in order of first mention, sentences in text order.
    per_sentence: dict[int, dict[str, None]] = defaultdict(dict)
    mentioned_in: dict[str, dict[int, None]] = defaultdict(dict)
    aliases: dict[str, dict[str, None]] = defaultdict(dict)
    for m, name in sorted(resolved, key=lambda p: p[0].sent):
        per_sentence[m.sent][name] = None
        mentioned_in[name][m.sent] = None
        if m.name != name:
            aliases[name][m.name] = None

    # What descriptions quote: a table's row as its cells read ("Ada Osk; Boston."), not its pipes.
    shown = [rows.get(i, s) for i, s in enumerate(sentences)] if rows else sentences
    entities = []
    for name in mentioned_in:
        # Body sentences describe better than a headline; a headline is the last resort.
        where = [s for s in mentioned_in[name] if s not in headlines] or list(mentioned_in[name])
        desc = _trim(joined([_DATELINE.sub("", shown[s]) for s in where[:2]]))
        if name in aliases:
            desc += _ALSO_CALLED + ", ".join(aliases[name]) + ".)"
        entities.append(EntityRecord(name=name, type=_emit_type(types[name], allowed), description=desc))
    relationships = _relationships({s: list(names) for s, names in per_sentence.items()},
                                   shown, blocks, headlines, list(mentioned_in))
    return Extraction(entities=entities, relationships=relationships, openers=openers,
                      called={name: list(shorter) for name, shorter in aliases.items()})


# --- sentences ---

def _sentences(text: str) -> tuple[list[str], list[int], set[int], dict[int, str], set[int]]:
    """Sentences (whitespace collapsed), the block index of each, which are headlines, the
    table rows among them as their cells read (``sentences.table_row_text``), for descriptions,
    and those that open a list item."""
    sentences: list[str] = []
    blocks: list[int] = []
    headlines: set[int] = set()
    rows: dict[int, str] = {}
    items: set[int] = set()
    text = _CODE_FENCE.sub("\n\n", text.replace("\r\n", "\n").replace("\r", "\n"))
    for b, block in enumerate(_BLOCK_SPLIT.split(text)):
        for item, lines, row in _line_groups(block):
            # (a headline a wrap cut is one too: "Annual Report of the" over "Harbour Board"
            # gave "Annual Report", its capitals read as names)
            line = lines[0] if len(lines) == 1 else " ".join(lines)
            if not item and (len(lines) == 1 or _cut_by_a_wrap(lines)) and _is_headline(line):
                sentences.append(_HEADING_MARK.sub("", line).strip(" #*_"))
                blocks.append(b)
                headlines.add(len(sentences) - 1)
                continue
            para = " ".join(" ".join(lines).split())     # the lines are stripped: \s+ -> " "
            if item and not row:
                items.add(len(sentences))
            for s in _split_sentences(para):
                if row:
                    rows[len(sentences)] = table_row_text(s) or s
                sentences.append(s)
                blocks.append(b)
    return sentences, blocks, headlines, rows, items


def _cut_by_a_wrap(lines: list[str]) -> bool:
    """Whether ``lines`` (a run of two or more) read as one line a wrap cut: each but the last
    ends where the next line's first word would not have fitted in the widest of them (to
    ``_WRAP_SLACK``, as ``_ends_alone`` measures). Lines a writer ended themselves, each a
    record of its own, are no headline however capitalised ("Ada Lovelace" over "12 St James
    Square" over "London", an address: its names were lost, the run read as a title); nor is a
    run each of whose lines parts a record's fields ("Ada Lovelace (Analytical Society)" over
    "Charles Babbage (Royal Society)", a list of attendees without bullets, whose lines a wrap
    could as well have cut: its names were lost, where nlp 29 read them all)."""
    width = _WRAP_SLACK * max(map(_columns, lines))
    return all(_columns(a) + 1 + _columns(b.split(None, 1)[0]) > width for a, b in zip(lines, lines[1:])) \
        and not all(_RECORD_FIELDS.search(line) for line in lines)


# Where a line parts a record's fields: "Ada Lovelace, Chair", "Ada Lovelace (Analytical
# Society)", "Ada Lovelace - Analytical Society" (``_cut_by_a_wrap``).
_RECORD_FIELDS = re.compile(r"\S(?:,| \(| [-\u2013\u2014] )\s*\S")


def line_starts(block: str) -> list[int]:
    """Which lines of ``block`` (a text without blank lines) begin a run of lines read as one
    text, by their indexes in ``block.split("\\n")``: the rule ``_line_groups`` reads lines by,
    shared with the simulator's sentences (``simulator.split_sentences``, which copied an older
    one and read "Ada Lovelace" over "Ada was ..." as "Ada Lovelace Ada"). A line read as no
    text (a heading in capitals, a bare quote mark) begins none."""
    starts: list[int] = []
    _line_groups(block, starts)
    return starts


def _line_groups(block: str, starts: list[int] | None = None) -> list[tuple[bool, list[str], bool]]:
    """A block's lines, without their Markdown marks (quote, bullet, task box, callout), in the
    runs that read as one text: a heading, a list item or a callout's title begins a run of its
    own (joined to the line above, "## Notes" and "Met with ..." gave "Notes Met"), and a
    heading ends its run; so does a line ending alone (``_ends_alone``). Other lines, prose a
    hard wrap cut, join the run above them. With each run, whether it is a list item (in title case, "Submit to Energy Policy Journal", no
    headline), and whether it is a table's row. A table's row is a run of its own, read as a list
    item is: its cells are records, not prose a hard wrap cut ("Role | City" over "Alice Johnson
    | Boston" gave "City Alice Johnson"), and a title-case row is no headline. ``starts``, if
    given, gets the index of each line that begins a run (``line_starts``)."""
    groups: list[tuple[bool, list[str], bool]] = []
    heading = row = caps = False
    lines = block.split("\n")
    lengths = [_columns(line.strip()) for line in lines]   # (display columns, as a wrap counts them)
    width = max(_WRAP_WIDTH, max(lengths))   # (``_ends_alone``)
    # The lines that say a wrap's width, for ``_ends_alone``'s ``measured`` (a line besides the
    # one above): those a wrap may have ended reaching ``_WRAP_SLACK`` of it. The block's last
    # line is none: its text ended it, wrapped or not, and two lines of a note as wide (".. and
    # Kim Lowe" over "Kim will send ...") were read as a wrap's, "Kim Lowe Kim".
    last = max((n for n, length in enumerate(lengths) if length), default=0)
    full = [n for n, length in enumerate(lengths) if n != last and length >= _WRAP_SLACK * width]
    rows = table_rows(lines) if "|" in block else [False] * len(lines)
    records = _records([raw[_LINE_MARK.match(raw).end():].strip() for raw in lines],
                       [raw[:1] in (" ", "\t") for raw in lines])
    above = 0   # (the index of the line above, the last one kept)
    for n, (raw, is_row) in enumerate(zip(lines, rows)):
        m = _LINE_MARK.match(raw)
        mark = m.group(1)
        if mark and mark[0].isdigit() and int(_NUMBER.match(mark).group()) != 1 and groups \
                and not groups[-1][0] and not heading:
            # Prose a hard wrap cut before a number ("... counted\n12. ships"): CommonMark
            # lets only a list numbered from 1 interrupt a paragraph. (A bullet may: "- " is one.)
            mark, line = None, raw[m.start(1):].strip()
        else:
            line = raw[m.end():].strip()
        # A word in capitals ending its sentence goes with the line dropped above it: a paragraph
        # all in capitals wraps its last word onto a line of its own ("...WET WITH\nTEARS."), no
        # acronym (a list of them under a heading, "PARTNERS\nNASA\nESA", ends in none).
        if line and (_is_caps_line(line) or caps and line.isupper() and line[-1] in _TRAILING):
            caps = True
            continue
        caps = False
        if not line:
            continue
        is_heading = _ATX_HEADING.match(line) is not None
        if is_row:
            groups.append((True, [line], True))
        elif n in records and not mark:
            groups.append((True, [line], False))
        elif mark or heading or row or not groups or is_heading or _ends_alone(
                groups[-1][1][-1], line, width, measured=any(n != above for n in full)):
            groups.append((bool(mark) and mark[0] != "[", [line], False))
        else:
            groups[-1][1].append(line)
        if starts is not None and len(groups[-1][1]) == 1:   # (a run begun here)
            starts.append(n)
        # (a record ends its run as a row does, but for a field's value going on under its label)
        heading, row, above = is_heading, is_row or records.get(n, _LABELLED) != _LABELLED, n
    return groups


def _records(lines: list[str], indented: list[bool] | None = None) -> dict[int, tuple[str, ...]]:
    """Which of a block's lines (without their Markdown marks) are records, each beginning a run
    read as a list item is (no headline), with their shape: two lines or more in a row, each
    opening with a field's label (``_LABELLED``: "To: Ada Lovelace <ada@x.org>" over "From:
    Charles Babbage <cb@x.org>", an e-mail's headers), or each of one shape (``_record_shape``:
    "Ada Lovelace of London" over "Charles Babbage of Cambridge", a list without bullets). Read
    as a headline a wrap cut, a title's capitals, they lost their names; as prose, they ran them
    together ("London Charles Babbage"). A labelled field's value folded onto indented lines
    (``indented``: "To: Ada Osk <a@x.org>," over "    Bo Lund <b@x.org>") parts no labelled
    lines: "Subject: ..." under such a fold, the headers' last, was a name ("Subject")."""
    shapes = [_record_shape(line) for line in lines]
    # (the lines compared, in order, without the folds under a label)
    kept: list[int] = []
    for n, shape in enumerate(shapes):
        if not (indented and indented[n] and shape is None and kept and shapes[kept[-1]] == _LABELLED):
            kept.append(n)

    def alike(a: int, b: int) -> bool:   # (lines a, b, b under a: of one shape, no name cut between)
        return shapes[a] == shapes[b] and (shapes[a] == _LABELLED or not _cut_name(lines[a], lines[b]))

    return {n: shapes[n] for k, n in enumerate(kept) if shapes[n] is not None and (
        k and alike(kept[k - 1], n) or k + 1 < len(kept) and alike(n, kept[k + 1]))}


def _cut_name(line: str, below: str) -> bool:
    """Whether a wrap may have cut a name of two words between a line ending in a capitalised word
    alone after a list's comma or "and", and one opening with a capitalised word alone: prose
    listing people and their places, wrapped, has lines of one shape ("Ada Lovelace of London,
    Charles" over "Babbage of Cambridge, Mary", both "of" and ","), and read as records its names
    were cut ("Charles"). A list's line ends with its own last field ("Duke of Wellington" over
    "Earl of Leicester") or opens with a name of its own ("Charles Babbage of Cambridge")."""
    ends = list(_WORD.finditer(line))[-2:]
    opens = list(_WORD.finditer(below))[:2]
    if len(ends) < 2 or not _lone_capital(line, ends[::-1]) or not _lone_capital(below, opens):
        return False
    gap = line[ends[0].end():ends[1].start()].strip()
    return gap in (",", ";", "&") or not gap and ends[0].group() in ("and", "or")


def _lone_capital(line: str, words: list[re.Match]) -> bool:
    """Whether the first of ``words`` (a line's last or first, then its neighbour) is a capitalised
    word standing alone: no capitalised word beside it but across a mark or a small word."""
    if not words or not words[0].group()[:1].isupper():
        return False
    if len(words) < 2:
        return True
    a, b = sorted(words, key=lambda w: w.start())
    return bool(line[a.end():b.start()].strip()) or not words[1].group()[:1].isupper()


def _record_shape(line: str) -> tuple[str, ...] | None:
    """What a line holds between its capitalised words, where it opens with one and holds no word
    in lower case but a small one ("of", "van"): those words and the marks between words, in
    order ("Ada Lovelace of London": "of"; "Ada Lovelace, of London": ",", "of"), or a field's
    label's colon ("To: ..."); None for a line of no small word (a name alone, "12 St James
    Square", "Ada Lovelace (Analytical Society)": ``_cut_by_a_wrap`` reads those) or of other
    words (prose)."""
    if not line[:1].isupper():   # (most lines of prose: the cheap test first)
        return None
    if _FIELD_LABEL.match(line):
        return _LABELLED
    shape = []
    end = None   # (where the word before ended)
    for w in _WORD.finditer(line):
        if end is None and w.start():
            return None
        gap = line[end:w.start()].strip() if end is not None else ""
        if gap:
            shape.append(gap)
        if w.group()[0].islower():
            if w.group() not in _HEADLINE_SMALL:
                return None
            shape.append(w.group())
        end = w.end()
    if end is None:
        return None
    if line[end:].strip():
        shape.append(line[end:].strip())
    # (marks alone make no record's shape: a list of names a wrap cut has lines of one, "Ada
    # Osk, 2013-2014, Bo" over "Lund, 2002-2010, Kim Lowe", and their names would be cut in two)
    return tuple(shape) if any(p[0].isalpha() for p in shape) else None


# A field's label opening a line: an e-mail's header ("To: ", "Reply-To: "), a note's field
# ("Owner: Ada Lovelace"); ``_records``.
_FIELD_LABEL = re.compile(r"[A-Z][A-Za-z]*(?:-[A-Za-z]+)*:[ \t]+\S")
_LABELLED = (":",)   # (the shape of a line a field's label opens: ``_record_shape``)


def _ends_alone(above: str, line: str, width: int, *, measured: bool = True) -> bool:
    """Whether a line ends its sentence though no blank line parts it from the next, which opens
    with a capital. So does a name alone or a title where a hard wrap did not end it: the next line's
    first word would have fitted on it in ``width`` (its block's widest line, at least
    ``_WRAP_WIDTH``) with room to spare (``_WRAP_SLACK``): "Ada Lovelace" or "Notes on Ada
    Lovelace" over "Ada was ..." (a note's first line), "Attendees", "Ada Osk", "Bo Lund" (a
    list without bullets). So does a line ending with a name whose own word opens the next ("I
    met Ada Lovelace" over "Ada said"), where that word would have fitted too (in ``width``).
    Read as prose a wrap cut, each gave one name of both ("Ada Lovelace Ada", "Attendees Ada Osk
    Bo Lund"). A wrap cuts a line only where the next word does not fit: a line all names is no
    rare thing in news wrapped at 40 or 70 columns ("Port Velvellfield Semiconductors"), and a
    name wrapped across its line end may repeat a word of it ("... written by Ford Madox" over
    "Ford and ..." was "Ford Madox"). That a wrap cut it is told only where ``measured``: a line
    besides ``above`` that a wrap may have ended (not the block's last) sets the width too
    (reaches ``_WRAP_SLACK`` of it). Where none does (a note's two lines, "... lunch downtown
    with Ada Lovelace" over a shorter "Ada said ...", or one as wide), no wrap says the next
    word would not have fitted: a line unwrapped is as long as its writer made it, and was read
    "Ada Lovelace Ada"."""
    if (not line[:1].isupper() and line[:1] not in _OPEN_QUOTE) or not above[-1:].isalnum():
        return False   # (most lines of prose: the cheap tests first)
    first = _WORD.search(line)
    if first is None or not first.group()[0].isupper() or not _capitalised(first.group())[0]:
        return False
    # (the next word as a wrap measures it: with the punctuation after it, "Talks."; a title
    # opens with no lower-case word, "in Lake Harstadford, Norova" over "Media Group runs ...",
    # and holds no sentence's end, "Norvane Maritime Safety Bureau. Norvane Maritime")
    room = _columns(above) + 1 + _columns(line.split(None, 1)[0])
    if room > width and measured:
        return False   # (a wrap cut it)
    if room <= _WRAP_SLACK * width and (
            _name_alone(above, _tokens(above))
            or not above[:1].islower() and is_title(above, common=_HEADLINE_COMMON, small=_HEADLINE_SMALL)) \
            and len(_split_sentences(above)) == 1:
        return True
    if first.group() not in above:
        return False
    toks = _tokens(above)
    k = len(toks)
    while k and toks[k - 1][_CAP] and not toks[k - 1][_POSS] and (
            k == len(toks) or above[toks[k - 1][_END]:toks[k][_START]].isspace()):
        k -= 1
    return any(t[_TEXT] == first.group() for t in toks[k:])


def _columns(text: str) -> int:
    """How many columns ``text`` takes in a fixed-width font, as a wrap counts them: a wide or
    full-width character (Chinese, Japanese, Korean; "Ａ") two, a combining mark none. Counted in
    characters, a Korean line of 70 columns was 47 wide, no line beside it as wide, and a name a
    wrap cut there ("... 작가는 바로 Ford Madox" over "Ford 이다. ...") was read as one its
    writer ended ("Ford Madox")."""
    if text.isascii() or not _WIDE_OR_MARK.search(text):   # (curly quotes, accents: one column each)
        return len(text)
    return len(text) + len(_WIDE_CHARACTER.findall(text)) - len(_MARK.findall(text))


# The blocks of wide and full-width characters (Unicode's East Asian Width W and F, as wcwidth
# reads them): Hangul, CJK and its punctuation, kana, Yi, Tangut, full-width forms, most emoji
# (``_columns``; a regular expression, as a chunk of prose with curly quotes is no ASCII, and
# asking ``unicodedata`` of each character made A Christmas Carol's extraction a fifth slower).
# Off by a column for some emoji and for the marks of Hebrew or Arabic vowels (no ``_MARK``):
# a wrap is told with a tenth to spare (``_WRAP_SLACK``).
_WIDE_CHARACTER = re.compile("[\u1100-\u115f\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff"
                             "\ua000-\ua4cf\ua960-\ua97f\uac00-\ud7a3\uf900-\ufaff\ufe10-\ufe19"
                             "\ufe30-\ufe6f\uff00-\uff60\uffe0-\uffe6\U0001f300-\U0001f64f"
                             "\U0001f900-\U0001f9ff\U00017000-\U00018cff\U0001b000-\U0001b2ff"
                             "\U00020000-\U0002fffd\U00030000-\U0003fffd]")
_WIDE_OR_MARK = re.compile(f"{_WIDE_CHARACTER.pattern}|{_MARK.pattern}")


def _name_alone(line: str, toks: list[_Token]) -> bool:
    """Whether a line is a name alone: capitalised words and, beside them, only spaces, the full
    stop of a title or an initial ("Dr. Ada B. Lovelace"), "&"."""
    return _NAME_LINE.fullmatch(_WORD.sub("", line)) is not None and all(t[_CAP] for t in toks)


# What a line that is a name alone holds beside its words (``_name_alone``).
_NAME_LINE = re.compile(r"[\s.&]*")
# The narrowest a hard wrap is taken to cut prose: a block of shorter lines (a list of names, a
# note's title over one short line) was ended line by line by its writer.
_WRAP_WIDTH = 30
# The share of a block's widest line the next word must fit in: a wrap that is not greedy ends
# lines short of it where that word would have fitted by a few characters (GNU fmt's optimum
# fit, a word processor's proportional font whose lines a PDF or a licence text keeps: "U.S.
# Department of Treasury's Office of Foreign Assets" over "Control (OFAC), ..." in a paragraph
# of 62 columns). 200 corpusgen articles put through `fmt -w 40` had 31 chunks' names changed
# against nlp 28 with the whole width (a name cut in two: "Norvane Maritime", "Safety Bureau"),
# 1 with nine tenths; a name alone or a title over longer lines has room to spare.
_WRAP_SLACK = 0.9


def _is_caps_line(line: str) -> bool:
    if not line.isupper():   # a lower-case letter, or no cased one: most lines end here, cheaply
        return False
    letters = [c for c in line if c.isalpha()]
    if len(letters) < 2 or not all(c.isupper() for c in letters):
        return False
    # A lone acronym on its own line ("NASA") is a name, anything longer is a heading.
    return len(line.split()) > 1 or len(letters) > 6


def _is_headline(line: str) -> bool:
    """Whether a block's one line is a headline: a Markdown heading's, or a title by its words
    (``sentences.is_title``, the rule extractive answers and reports read titles by), a name
    particle in lower case ("van", "de") a small word of it too, and more capitalised words than
    common words and particles (a sentence's opener in capitals counts for none). Unlike
    ``sentences.is_heading`` it does not ask for a body after the line: a headline is read for
    the names the body holds, and is a description's last resort, never left out. A line ending
    with a full-width terminator ("。") is a sentence: its words in Chinese or Japanese are of
    neither case, and "作者は Ford Madox Ford である。" was a title by its capitals, no name read."""
    if _HEADING_MARK.match(line) is not None:
        return True
    return line.rstrip(CJK_CLOSERS)[-1:] not in CJK_TERMINATORS \
        and is_title(line, common=_HEADLINE_COMMON, small=_HEADLINE_SMALL)


def _split_sentences(para: str) -> list[str]:
    out = []
    start = 0
    for m in _SENTENCE_END.finditer(para):
        end = m.end()
        if end < len(para) and para[end].islower():
            continue
        if m.group(1) == ".":
            before = para[start:m.start()].rsplit(None, 1)
            last = before[-1].lower() if before else ""
            last = last.lstrip("\"'(\u201c\u2018")
            if last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha()):
                continue
        out.append(para[start:m.end()].strip())
        start = end
    tail = para[start:].strip()
    if tail:
        out.append(tail)
    return out


def _initial_indexes(sentence: str, toks: list[_Token]) -> set[int]:
    """Tokens that begin the sentence or a quotation, where capitals say nothing."""
    if not _INITIAL_MARK.search(sentence):      # most sentences: no quotation, only the first word
        return next(({j} for j, t in enumerate(toks) if not t[_TEXT].isdigit()), set())
    out = set()
    for j, t in enumerate(toks):
        if not out and not t[_TEXT].isdigit():
            out.add(j)
            continue
        k = t[_START] - 1
        while k > 0 and sentence[k] in "_*":     # emphasis: "[Illustration: _Laden with toys_]"
            k -= 1
        if k >= 0 and sentence[k] in _OPEN_QUOTE and (k == 0 or not sentence[k - 1].isalnum()):
            out.add(j)
        elif k >= 1 and sentence[k] == " " and sentence[k - 1] in _CLAUSE_MARKS:
            out.add(j)
    return out


# --- names ---

def _german_hits(text: str, lows: list[str]) -> int:
    """How many of the lower-case words ``lows`` of ``text`` are German function words."""
    if " und " not in text and " der " not in text and " die " not in text:
        return 0                # cheaply, first: most English chunks end here
    hits = sum(map(_DE_MARKERS.__contains__, lows)) + sum(map(lows.count, _DE_ARTICLES))
    return hits - sum(map(text.count, _NAME_ARTICLES))


def _german_nouns(sentences: list[str], tokens: list[list[_Token]], hits: int) -> frozenset[str] | None:
    """None unless the chunk is German (``hits`` of its words German function words); then the
    capitalised words it puts after an article ("der Hund", "im Haus"): nouns, wherever else they stand."""
    if hits < 3 or hits < _DE_SHARE * sum(map(len, tokens)):
        return None
    return frozenset(toks[j][_TEXT] for s, toks in zip(sentences, tokens) for j in range(1, len(toks))
                     if toks[j][_CAP] and toks[j - 1][_TEXT].lower() in _DE_DETERMINERS
                     and _plain_gap(s, toks[j - 1], toks[j]))


def _de_determined(sentence: str, toks: list[_Token], j: int) -> bool:
    """Whether German token ``j`` follows an article, maybe past adjectives ("den neuen Präsidenten")."""
    k = j - 1
    while k >= 0 and j - k <= 3 and _plain_gap(sentence, toks[k], toks[k + 1]):
        low = toks[k][_TEXT].lower()
        if low in _DE_DETERMINERS:
            return True
        if not toks[k][_TEXT].islower() or low in _DE_FUNCTION:
            return False
        k -= 1
    return False


def _plain_gap(sentence: str, a: _Token, b: _Token) -> bool:
    return b[_START] > a[_END] and sentence[a[_END]:b[_START]].isspace()


def _sentence_mentions(i: int, sentence: str, toks: list[_Token], initial: set[int],
                       lower_words: set[str], mid_caps: set[str],
                       de: frozenset[str] | None, *, item: bool = False,
                       skipped: list[str] | None = None) -> list[_Mention]:
    """The names of one sentence; ``item``: it opens a list item (``_IMPERATIVES``); ``skipped``
    gets its lone opening word read as no name only for opening it (``_mention_from_run``)."""
    out: list[_Mention] = []
    n = len(toks)
    j = 0       # the first token no name took yet
    for c in [k for k, t in enumerate(toks) if t[_CAP]]:   # names start capitalised: skip to those
        if c < j or toks[c][_TEXT].isdigit():
            continue
        j = c
        t = toks[j]
        if t[_CAPS]:
            # Acronyms stand alone; a row of ALL-CAPS words is a heading or a dateline.
            k = j
            while k + 1 < n and toks[k + 1][_CAPS] and _plain_gap(sentence, toks[k], toks[k + 1]):
                k += 1
            if k == j and len(t[_TEXT]) <= 6 and t[_TEXT].isalpha() and t[_TEXT].lower() not in _NOISE \
                    and t[_TEXT].lower() not in _COMMON:
                out.append(_Mention(i, t[_TEXT], acronym=True, poss=t[_POSS],
                                    prep=_prep_before(sentence, toks, j)))
            j = k + 1
            continue
        parts = _run(sentence, toks, j, german=de is not None)
        j = parts[-1] + 1
        if len(parts) > 1 and c in initial and toks[c][_TEXT].lower() in _DONE \
                and _cue_type(" ".join(toks[p][_TEXT] for p in parts)) not in ("organization", "event"):
            parts = parts[1:]       # "Met Ada again.": a note's verb, its subject left out; not "Met Office"
        m = _mention_from_run(i, sentence, toks, parts, initial, lower_words, mid_caps, de,
                              order=item and c == 0, skipped=skipped)
        if m is not None:
            out.append(m)
    return out


def _run(sentence: str, toks: list[_Token], j: int, *, german: bool = False) -> list[int]:
    """Indexes of the tokens of the capitalised name starting at token ``j``."""
    parts = [j]
    n = len(toks)
    while True:
        k = parts[-1]
        cur = toks[k]
        # "St. Paul's Churchyard"; a plural's possessive names an institution ("the Fishermen's
        # Guild", "the Workers' Party"), a person's ends the name ("Scrooge's nephew").
        if cur[_POSS] and not (toks[parts[0]][_TEXT].lower() in ("st", "saint") and len(parts) <= 2) \
                and not (cur[_PLURAL_POSS] and k + 1 < n and toks[k + 1][_CAP] and not toks[k + 1][_CAPS]
                         and toks[k + 1][_TEXT].lower() in _INSTITUTION_HEADS):
            break
        if k + 1 >= n:
            break
        nxt = toks[k + 1]
        if nxt[_TEXT] == cur[_TEXT]:        # "called Scrooge Scrooge"
            break
        gap = sentence[cur[_END]:nxt[_START]]
        low = cur[_TEXT].lower()
        if nxt[_CAP] and not nxt[_CAPS] and not nxt[_TEXT].isdigit():
            if gap.isspace() or (gap == ". " and (low in _ABBREVIATIONS or low in _HONORIFICS
                                                  or (len(cur[_TEXT]) == 1 and cur[_TEXT].isupper()))):
                parts.append(k + 1)
                continue
            if gap.strip() == "&" and len(gap) <= 3:
                parts.append(k + 1)
                continue
            break
        if not gap.isspace() or k + 2 >= n:
            break
        word = nxt[_TEXT]
        after = toks[k + 2]
        if not _plain_gap(sentence, nxt, after):
            break
        # "Ursula von der Leyen", "Jan van den Berg": one or two particles, then a capital.
        if word in (_DE_PARTICLES if german else _PARTICLES):
            last = k + 2
            if not after[_CAP] and after[_TEXT] in _PARTICLES and k + 3 < n \
                    and _plain_gap(sentence, after, toks[k + 3]):
                last = k + 3
            end = toks[last]
            if end[_CAP] and not end[_CAPS] and not end[_TEXT].isdigit() and (not german or _de_particle(
                    sentence, toks, parts, last)):
                parts += list(range(k + 1, last + 1))
                continue
        if word == "of" and low in _OF_HEADS:
            if after[_CAP] and not after[_CAPS] and not after[_TEXT].isdigit():
                parts += [k + 1, k + 2]
                continue
            if after[_TEXT] == "the" and k + 3 < n and toks[k + 3][_CAP] and not toks[k + 3][_CAPS] \
                    and _plain_gap(sentence, after, toks[k + 3]):
                parts += [k + 1, k + 2, k + 3]
                continue
        break
    return parts


def _de_particle(sentence: str, toks: list[_Token], parts: list[int], last: int) -> bool:
    """Whether a German particle joins: after a first name only, before a one-word surname, and
    not "zu" before a noun ("Karl-Theodor zu Guttenberg", not "Christine Lagarde von der
    Europäischen Zentralbank" nor "Hans zu Besuch")."""
    if len(parts) > 1 or (toks[parts[-1] + 1][_TEXT] == "zu" and toks[last][_TEXT].lower() in _DE_ZU_NOUNS):
        return False
    nxt = last + 1
    return not (nxt < len(toks) and toks[nxt][_CAP] and _plain_gap(sentence, toks[last], toks[nxt]))


def _mention_from_run(i: int, sentence: str, toks: list[_Token], parts: list[int],
                      initial: set[int], lower_words: set[str], mid_caps: set[str],
                      de: frozenset[str] | None = None, *, order: bool = False,
                      skipped: list[str] | None = None) -> _Mention | None:
    words = [toks[p][_TEXT] for p in parts]
    common = False
    if parts[0] in initial:
        first = words[0].lower()
        common = not (first in _GEO_PREFIXES and len(words) > 1) and first not in _HONORIFICS \
            and first not in _KEEP_TITLES \
            and (first in _COMMON or first in _NOISE or first in lower_words
                 or (first in _IMPERATIVES and "of" not in words
                     and (order or (len(words) > 1 and not _verb_beyond(sentence, toks, parts[-1])))
                     and _cue_type(" ".join(words)) not in ("organization", "event"))
                 or (de is not None and (first in _DE_DETERMINERS or first in _DE_FUNCTION
                                         or first in _DE_OPENERS)))
        if not common and len(words) == 1 and words[0] not in mid_caps \
                and not (first in _GEO_KNOWN and _opens_cell(sentence, toks[parts[0]])):
            if skipped is not None:     # ("Ada was ...": a person's note may say her so alone)
                skipped.append(words[0])
            return None
    honorific = title = False
    # (an opening word read as common goes first: "Ask Dr. Ada Osk" then loses its honorific)
    lead = 1 if parts[0] in initial and common else 0
    # (no modal follows an order's word: "Ask Will Smith" keeps "Will")
    order_word = lead == 1 and words[0].lower() in _IMPERATIVES
    # Leading honorifics go; leading common words ("Every One", "A Merry Christmas") and
    # noise ("Chapter") go; connectors left dangling at either edge go.
    while lead < len(words) - 1:
        low = words[lead].lower()
        if low in _HONORIFICS:
            honorific = True
        elif order_word and lead == 1 and low in _FIRST_NAMES:
            break
        elif not ((low in _NOISE and low not in _KEEP_TITLES) or words[lead].islower()
                  or (low in _COMMON and low not in _ADJECTIVES)):
            break
        lead += 1
    if lead < len(words) - 1 and words[lead].lower() in _GREETINGS \
            and _cue_type(" ".join(words[lead + 1:])) == "event":
        lead += 1               # "Merry Christmas" is Christmas, "A Happy New Year" the New Year
    parts, words = parts[lead:], words[lead:]
    while words and (words[-1].islower() or (len(words) > 1 and words[-1].lower() in _NOISE
                                             and words[-1].lower() not in _KEEP_TITLES)):
        parts, words = parts[:-1], words[:-1]
    if words and de is not None:
        parts, words = _de_name(sentence, toks, parts, words, de)
    if not words or all(len(w) < 2 for w in words):
        return None
    low = words[0].lower()
    if len(words) == 1:
        if len(words[0]) < 2 or low in _NOISE or low in _COMMON or low in _KEEP_TITLES \
                or low in _HONORIFICS or low in _DEMONYMS:
            return None
    else:
        title = low in _KEEP_TITLES
    first, last = parts[0], parts[-1]
    start, end = toks[first][_START], toks[last][_START] + len(toks[last][_TEXT])
    # A year beside an event word is part of the event's name.
    if _cue_words(words[-1])[-1] in _EVENT_WORDS:
        if last + 1 < len(toks) and _YEAR.fullmatch(toks[last + 1][_TEXT]) \
                and _plain_gap(sentence, toks[last], toks[last + 1]):
            end = toks[last + 1][_START] + len(toks[last + 1][_TEXT])
            last += 1
        elif first > 0 and _YEAR.fullmatch(toks[first - 1][_TEXT]) \
                and _plain_gap(sentence, toks[first - 1], toks[first]):
            start = toks[first - 1][_START]
    name = _SPACES.sub(" ", sentence[start:end])
    poss = toks[last][_POSS]
    prep = _prep_before(sentence, toks, first - 1 if honorific else first)
    locus = "" if honorific else _locus_before(sentence, toks, first)
    if de is not None:          # a German word after a preposition may be a noun ("mit Kaffee")
        det = first > 0 and toks[first - 1][_TEXT].lower() in _DE_PREPOSITIONS
    else:
        det = not honorific and _determined(sentence, toks, first)
    acting = _agent(sentence, toks, first, last) if det else None
    speaks = (last + 1 < len(toks) and (toks[last + 1][_TEXT] in _SPEECH_VERBS or toks[last + 1][_TEXT] in _PERSON_VERBS)
              and _plain_gap(sentence, toks[last], toks[last + 1])) or \
        (first > 0 and toks[first - 1][_TEXT] in _SPEECH_VERBS
         and _plain_gap(sentence, toks[first - 1], toks[first]) and not _verb_after(sentence, toks, last)) \
        or acting == "speaks"
    the = det and toks[first - 1][_TEXT].lower() == "the"
    # (not before a word in lower case: "a glass of Napa Valley wine" names the wine's place,
    # "pieces of Lego were missing" says what the pieces are of)
    measured = first > 1 and toks[first - 1][_TEXT] == "of" and toks[first - 2][_TEXT].lower() in _MEASURES \
        and _plain_gap(sentence, toks[first - 2], toks[first - 1])
    eaten = first > 0 and toks[first - 1][_TEXT] in _EATING
    measure = ("of" if measured else "eaten") if not poss and (measured or eaten) \
        and _plain_gap(sentence, toks[first - 1], toks[first]) \
        and not (last + 1 < len(toks) and toks[last + 1][_TEXT].islower()
                 and toks[last + 1][_TEXT] not in TITLE_SMALL
                 and _plain_gap(sentence, toks[last], toks[last + 1])) else ""
    qualifies = not poss and last + 1 < len(toks) and _plain_gap(sentence, toks[last], toks[last + 1]) \
        and _noun_at(sentence, toks, last + 1)
    goes = not poss and last + 1 < len(toks) and toks[last + 1][_TEXT] in _MOVING \
        and _plain_gap(sentence, toks[last], toks[last + 1])
    return _Mention(i, name, honorific=honorific, title=title, prep=prep and not poss, poss=poss,
                    det=det, agent=acting or "", initial=first in initial, speaks=speaks, the=the,
                    locus="" if poss else locus, measure=measure, qualifies=qualifies, goes=goes)


def _verb_form(w: str) -> bool:
    """Whether a word in lower case reads as a verb (or an adverb) after a subject."""
    return (w.endswith(("ed", "ly", "ing")) and w not in _ING_NO_VERBS) or w in _IRREGULAR_VERBS \
        or w in _NARRATIVE_VERBS or w in _SPEECH_VERBS or w in _LIVING_VERBS or w in _ARRIVING


def _verb_after(sentence: str, toks: list[_Token], last: int) -> bool:
    """Whether a verb follows the name ending at token ``last``: after "said" it is then the
    subject of what was said ("said Oxford scored", "said the Red Cross delivered"), not the
    speaker ("said Scrooge", "said Scrooge, smiling", "said the Ghost quietly")."""
    j = last + 1
    if j >= len(toks) or not _plain_gap(sentence, toks[last], toks[j]):
        return False
    return _verb_word(toks[j][_TEXT])


def _verb_word(w: str) -> bool:
    """Whether a word right after a name, or past an adverb after it, reads as its verb
    (``_verb_after``; ``_verb_at``, not after names listed nor what a name owns)."""
    return w.islower() and not w.endswith("ly") and w not in _NO_NOUNS \
        and (_verb_form(w) or w.endswith("s") and w not in _COMMON)


def _verb_beyond(sentence: str, toks: list[_Token], last: int) -> bool:
    """Whether a verb follows the name ending at token ``last``, at once or past an adverb ("Ring
    Lardner never wrote", "Ask Jeeves quickly became", "Ask Jeeves could not"): the name is then
    the subject, no order's object (``_mention_from_run``; not "Call Margaret Hollis soon.").
    Past what it owns ("Ping An's profits rose"; not "Check Margaret Hollis's numbers."), an
    aside between commas ("Ask Jeeves, the search engine, was renamed"; not "Call Bob Lin, the
    clerk, about it") and other names it is listed with ("Ring Lardner and Damon Runyon wrote";
    not "Email Ada Osk and Bo Lund about the trip"); past names listed or what a name owns an
    auxiliary or a past tense only (``_verb_at``)."""
    n = len(toks)
    listed = False
    while not toks[last][_POSS] and last + 1 < n:
        nxt = last + 1
        gap = sentence[toks[last][_END]:toks[nxt][_START]].strip()
        # (", and Name" too: a serial comma, "Ring Lardner, Damon Runyon, and Ben Hecht wrote")
        conj = gap in ("", ",") and toks[nxt][_TEXT] in ("and", "or") and nxt + 1 < n and toks[nxt + 1][_CAP] \
            and _plain_gap(sentence, toks[nxt], toks[nxt + 1])
        if conj or (gap in (",", "&") and toks[nxt][_CAP]):
            last = nxt + 1 if conj else nxt
            while last + 1 < n and toks[last + 1][_CAP] and _plain_gap(sentence, toks[last], toks[last + 1]):
                last += 1
            listed = True
        elif gap == ",":
            close = next((m for m in range(nxt + 1, n)
                          if sentence[toks[m - 1][_END]:toks[m][_START]].strip() == ","), None)
            return close is not None and _verb_at(sentence, toks, close, listed)
        else:
            break
    if toks[last][_POSS]:   # (the name's, or the last listed one's: "Ask Ada and Bo Lund's team first")
        j = last
        while j + 1 < n and j - last < 3 and _plain_gap(sentence, toks[j], toks[j + 1]) \
                and _owned(toks[j + 1][_TEXT]):
            j += 1
        return j > last and j + 1 < n and _plain_gap(sentence, toks[j], toks[j + 1]) \
            and _verb_at(sentence, toks, j + 1, True)
    return last + 1 < n and _plain_gap(sentence, toks[last], toks[last + 1]) \
        and _verb_at(sentence, toks, last + 1, listed)


def _owned(w: str) -> bool:
    """Whether a word after a possessive name is of what it owns ("Hollis's numbers", "Ping An's
    quarterly profits"), not a verb or a word leading on ("Hollis's report by Friday")."""
    return w.isalpha() and w.islower() and w not in TITLE_SMALL and w not in _MODALS \
        and w not in _AUXILIARIES and not _verb_form(w)


def _verb_at(sentence: str, toks: list[_Token], j: int, finite: bool) -> bool:
    """Whether token ``j`` opens the verb of the subject before it: a modal, or a verb at once or
    past an adverb (``_verb_word``). After names listed or what a possessive owns (``finite``),
    where an order's second object or its adverb follows as readily ("Give Ada and Bo feedback",
    "Send Ada and Bo home"), or the owned noun goes on ("Ask Ada Osk's team leads first", "Send
    Ada Osk's team meeting notes"), only an auxiliary or a past tense (``_finite_past``: "Ask
    Jeeves and Bing are", "Ring Lardner and Damon Runyon wrote", "Ping An's profits rose"). Not
    a bare verb ("Help Scout and Zendesk compete" reads as "Help Ada and Bo move"), nor an "-s"
    (a plural subject's verb has none, a noun may: "Give Ada and Bo hugs")."""
    w = toks[j][_TEXT]
    if w in _MODALS or (finite and w in _AUXILIARIES):
        return True
    if (w in _SUBJECT_ADVERBS or (w.islower() and w.endswith("ly"))) and j + 1 < len(toks) \
            and _plain_gap(sentence, toks[j], toks[j + 1]):
        w = toks[j + 1][_TEXT]
    if not finite:
        return _verb_word(w)
    return w.isalpha() and w.islower() and _verb_form(w) and _finite_past(w)


def _finite_past(w: str) -> bool:
    """Whether a word read as a verb (``_verb_form``) is a past tense no bare verb, "-s" plural or
    "-ing" noun shares ("wrote", "merged", "met"; not "set", "stay", "leads", "funding"), nor a
    common word ending so ("indeed", "hundred") nor another that is no past tense ("need", "seed":
    ``_ED_NO_PAST``)."""
    return not w.endswith(("s", "ing", "ly")) and w not in _BARE_VERBS and w not in _ED_NO_PAST \
        and not (w.endswith("ed") and w in _COMMON)


def _noun_at(sentence: str, toks: list[_Token], j: int) -> bool:
    """Whether token ``j``, right after a name, is a noun the name qualifies ("Hill staffers
    left", "City fans cheered", "the Hill office"), not the name's verb ("Hill returned", "Hill
    won"). A word ending in "s" is a plural only before a verb ("staffers left"; "Hill wants
    more" is a verb's)."""
    w = toks[j][_TEXT]
    if not w.isalpha() or not w.islower() or w in _COMMON or w in TITLE_SMALL or _verb_form(w) \
            or w in _NO_NOUNS:
        return False
    if w.endswith("s") and not w.endswith("ss"):
        return j + 1 < len(toks) and _plain_gap(sentence, toks[j], toks[j + 1]) \
            and toks[j + 1][_TEXT].islower() and _verb_form(toks[j + 1][_TEXT])
    return True


def _opens_cell(sentence: str, tok: _Token) -> bool:
    """Whether the word begins a table's cell, where a known place stands alone ("| Chicago |")
    as a header's label ("| City |") does."""
    return sentence[:tok[_START]].rstrip().endswith("|")


def _de_name(sentence: str, toks: list[_Token], parts: list[int], words: list[str],
             nouns: frozenset[str]) -> tuple[list[int], list[str]]:
    """The name in a German run: leading nouns go ("den Präsidenten", "Kanzlerin Angela Merkel"
    beside "die Kanzlerin"), and a lone noun is none; an adjective keeps the run whole ("die
    Deutsche Bank"), and a known place or body stays ("die Schweiz", "der Bundestag")."""
    det = _de_determined(sentence, toks, parts[0])
    if det and len(words) > 1 and _DE_ADJECTIVE.search(words[0].lower()):
        return parts, words
    while len(words) > 1 and (det or words[0].islower() or
                              (words[0] in nouns and words[0].lower() not in _KEEP_TITLES) or
                              words[0].lower() in _DE_COUNTS or
                              (len(words) > 2 and words[0].lower().endswith(_DE_TITLE_ENDINGS))):
        parts, words, det = parts[1:], words[1:], False
    low = words[0].lower()
    if len(words) == 1 and (det or words[0] in nouns) and low not in _GEO_KNOWN and low not in _DE_BODIES:
        return [], []
    return parts, words


def _determined(sentence: str, toks: list[_Token], j: int) -> bool:
    """Whether token ``j`` follows a determiner ("the Parrot", "a jolly Giant", "that blessed
    Star") or another name's possessive ("the Sultan's Groom"): English gives a person's name
    neither, so a lone word there is a common noun capitalised for emphasis."""
    k = j - 1
    adjectives = 0
    epithet = False
    while k >= 0 and _plain_gap(sentence, toks[k], toks[k + 1]):
        t = toks[k]
        low = t[_TEXT].lower()
        if t[_POSS]:
            # "Marley's Ghost", not "Here's Martha"
            return t[_CAP] and low not in _COMMON and not epithet
        if low in _DETERMINERS:
            # "that" is a conjunction as often ("convinced that Hamlet's father"), unless an
            # adjective follows it ("that blessed Star"). An adjective that opens names in
            # capitals makes a common noun after "a" ("a bad young Act") but is a person's
            # epithet after the others ("the young Mozart", "the great Houdini", "his old Fezziwig").
            if epithet:
                return low in ("a", "an")
            return low != "that" or adjectives > 0
        # "your uncle Scrooge", "his friend Topper": a title or kin word names the name; a
        # particle is another language's ("a visité la Bretagne": French "a" is no article).
        if not t[_TEXT].islower() or (low in _COMMON and low not in _ADJECTIVES) or low in TITLE_SMALL \
                or low in _KEEP_TITLES or low in _KIN or low in _PARTICLES or adjectives == 2:
            return False
        epithet = epithet or low in _ADJECTIVES
        adjectives += 1
        k -= 1
    return False


def _agent(sentence: str, toks: list[_Token], first: int, last: int) -> str | None:
    """Whether tokens ``first``..``last``, right after "the" (or "this", "that"), speak or act:
    "said the Ghost", "the Phantom replied" ("speaks"), "the White Rabbit ran" as only a living
    being does ("lives": ``_LIVING_VERBS``), "the Phantom (slowly) pointed", "the Phantom was"
    ("acts"), else None. Who does so is a character, however common the word naming
    it; "the Parrot, you know" is not."""
    k = first - 1
    if k < 0 or toks[k][_TEXT].lower() not in ("the", "this", "that") \
            or not _plain_gap(sentence, toks[k], toks[first]):
        return None             # "its mighty Founder was", "the Sultan's Groom turned": no one
    if k >= 1 and toks[k - 1][_TEXT] in _PREPOSITIONS:
        return None             # "the Genius of the Weather sat": the Genius sits
    if k >= 1 and toks[k - 1][_TEXT] in _SPEECH_VERBS and _plain_gap(sentence, toks[k - 1], toks[k]) \
            and not _verb_after(sentence, toks, last):
        return "speaks"
    j = last + 1
    if j < len(toks) and toks[j][_TEXT].endswith("ly") and _plain_gap(sentence, toks[j - 1], toks[j]):
        j += 1                  # an adverb between
    if j >= len(toks) or not _plain_gap(sentence, toks[j - 1], toks[j]):
        return None
    verb = toks[j][_TEXT]
    if verb in _SPEECH_VERBS:
        return "speaks"
    if verb in _LIVING_VERBS or (verb in _RUNNING and (j + 1 == len(toks) or toks[j + 1][_TEXT] in _RUN_WAYS
                                                       and _plain_gap(sentence, toks[j], toks[j + 1]))):
        return "lives"                  # "ran off", or "ran." with nothing after: a being's
    if verb in _BE and j + 1 < len(toks) and _plain_gap(sentence, toks[j], toks[j + 1]) \
            and _participle(toks[j + 1][_TEXT]) and toks[j + 1][_TEXT] not in _FEELINGS:
        return None             # "The Engine was described": done to it, no act of its own
    return "acts" if verb in _NARRATIVE_VERBS or (len(verb) > 4 and verb.islower() and verb.endswith("ed")) \
        else None


def _participle(w: str) -> bool:
    """Whether a word in lower case reads as a past tense or participle ("described", "built")."""
    return w.islower() and (len(w) > 4 and w.endswith("ed") or w in _PARTICIPLES)


def _prep_before(sentence: str, toks: list[_Token], j: int) -> bool:
    """Whether "in", "at", "near" ... directly precedes token ``j`` (a cue for a place)."""
    return j > 0 and toks[j - 1][_TEXT].lower() in _GEO_PREPOSITIONS \
        and _plain_gap(sentence, toks[j - 1], toks[j]) and not _in_someone(toks, j)


def _in_someone(toks: list[_Token], j: int) -> bool:
    """Whether the word before the preposition before token ``j`` takes someone ("confided in
    Priya", "their trust in Ravi"; not "a family trust in Guernsey": ``_IN_SOMEONE``)."""
    if j < 2 or toks[j - 2][_TEXT] not in _IN_SOMEONE:
        return False
    return toks[j - 2][_TEXT] not in _TRUST or j > 2 and toks[j - 3][_TEXT].lower() in _TRUSTING


def _locus_before(sentence: str, toks: list[_Token], j: int) -> str:
    """Which place's preposition directly precedes token ``j`` ("on Cornhill", "walked from
    Highgate"), if any: "in" for one of _GEO_PREPOSITIONS ("near" for those that take someone
    as readily, ``_NEAR_PREPOSITIONS``), "at" for "at" after a job or a working (``_at_a_body``)
    and "on" for any other "at", "on" ... not after a
    word taking a person (``_AT_PREPOSITIONS``), "way" for "along" and for those after a going or
    an arrival (``_ARRIVING``; "through" after "went" ... only when someone goes: ``_goer_before``)
    and for "to"/"from"/"past" ... after a going (``_WAY_PREPOSITIONS``), "to" for both after a
    going that takes someone as readily (``_GOING_TO_ANYONE``: "went to Ravi") and in "from X
    to Y" after no going ("passed from Ravi to Priya"); else ""."""
    if j == 0 or not _plain_gap(sentence, toks[j - 1], toks[j]):
        return ""
    prep = toks[j - 1][_TEXT].lower()
    before = toks[j - 2][_TEXT].lower() if j > 1 else ""
    if prep in _GEO_PREPOSITIONS:
        if _in_someone(toks, j):
            return ""               # "confided in Priya"
        return "near" if prep in _NEAR_PREPOSITIONS else "in"
    if prep == "along":
        return "way"                # one goes, walks or lives along a place, never along someone
    if prep in _AT_PREPOSITIONS:
        if before in _GOING or before in _ARRIVING:
            # "docked at Sausalito", "drove through Hampstead"; someone who goes through goes
            # through a place ("Kim Lowe went through Customs"), what goes through goes through
            # someone's hands as readily ("Everything goes through Priya": ``_goer_before``)
            if prep == "through" and (before not in _GOING_TO_SOMEONE or _goer_before(toks, j - 2)):
                return "way"
            return _going(before)
        if before in _PERSON_BEFORE_PREPOSITION:
            return ""
        return "at" if prep == "at" and _at_a_body(toks, j - 1) else "on"
    if prep == "to" and j > 2 and toks[j - 2][_CAP] and toks[j - 3][_TEXT].lower() == "from":
        # "from Norwich to Ipswich": Ipswich
        return _going(toks[j - 4][_TEXT].lower() if j > 3 else "")
    if prep == "from" and j + 2 < len(toks) and toks[j + 1][_TEXT].lower() == "to" and toks[j + 2][_CAP] \
            and _plain_gap(sentence, toks[j], toks[j + 1]):
        return _going(before)   # ... and Norwich, whatever goes before ("marched from Norwich to Ipswich")
    if prep in ("and", "or") and j > 1 and toks[j - 2][_CAP]:
        # one of a list of places: "to Greenwich and Canterbury", "in Leeds or Bradbury"; not
        # for any lone word, as "and" may begin a clause: "moved to Leeds and Priya stayed"
        first = "in" if toks[j - 2][_TEXT].lower() in _GEO_KNOWN else _locus_before(sentence, toks, j - 2)
        return "to" if first == "way" else first
    return _going(before) if prep in _WAY_PREPOSITIONS and before in _GOING else ""


def _at_a_body(toks: list[_Token], at: int) -> bool:
    """Whether the "at" at token ``at`` follows a job or a working, studying or meeting
    (``_AT_A_BODY``: "secretary at Port", "worked at Ruvtane", "met Ann Marsh at Google",
    "head of operations at Renell", "chair of the board at Ruvtane"), past the names or a
    pronoun that are its object, an adverb ("worked there at"), or what the job is of; not "a
    swipe at Johnson", "a glass at Marcus"."""
    k = at - 1
    while k >= 0 and (toks[k][_CAP] and k > 0 or toks[k][_TEXT].lower() in _OBJECTS) and k > at - 4:
        k -= 1
    while k >= 0 and toks[k][_TEXT] in _AT_ADVERBS and k > at - 5:
        k -= 1                  # "worked there at Ruvtane", "worked for years at Ruvtane"
    if k < 0:
        return False
    if toks[k][_TEXT].lower() in _AT_A_BODY:
        return True             # ("a member of staff at Ruvtane")
    # what the job is of: "head of research at Jorden", "chair of the board at Ruvtane"
    of = next((o for o in range(k - 1, max(k - 3, 0), -1) if toks[o][_TEXT] == "of"
               and all(toks[q][_TEXT].islower() for q in range(o + 1, k + 1))), None)
    return of is not None and toks[of - 1][_TEXT].lower() in _AT_A_BODY


def _goer_before(toks: list[_Token], v: int) -> bool:
    """Whether someone goes: the going at token ``v`` has a personal pronoun or a name before it,
    past an auxiliary or two ("Kim Lowe went", "She was going"), or a way or a vehicle ("The
    road goes": ``_WAYS_THROUGH``), not a thing ("Everything goes",
    "All approvals went", "Requests go": a capitalised word in -s opening the sentence reads as
    a plural noun unless a given name or before "goes": "Requests go", not "James went")."""
    k = v - 1
    while k >= 0 and toks[k][_TEXT].lower() in _AUXILIARIES | _GOER_ADVERBS and k > v - 3:
        k -= 1                  # ("She was going", "We all went", "They then went")
    if k < 0:
        return False
    w = toks[k][_TEXT]
    low = w.lower()
    if low in _GOERS or low in _WAYS_THROUGH:
        return True
    # (a given name in -s is one ("James went"), and so is any word before "goes"/"comes": a
    # plural noun would say "go")
    return toks[k][_CAP] and low not in _COMMON and low not in _NOISE \
        and not (k == 0 and low.endswith("s") and not low.endswith("ss") and low not in _FIRST_NAMES
                 and toks[v][_TEXT] not in ("goes", "comes"))


def _going(before: str) -> str:
    """A going's preposition: "way" after one that takes a place ("moved to", "docked at", "the
    train from"), "to" after any other word ("went to Ravi", "passed from Ravi to Priya")."""
    return "way" if (before in _GOING or before in _ARRIVING) and before not in _GOING_TO_ANYONE else "to"


# The verbs a headline puts after a person's surname ("Dr. Lowe Resigns", "Prof. Osk Wins"),
# where ``_opener_named`` ends the name: a list, as a word in "-s" (``_verb_word``) is as often a
# surname (Jones, Williams, Evans, Davies, Roberts, Harris, Ross, Thomas), and one in "-ed" or
# "-ing" too (Reed, Ahmed, King, Fielding): "Dr. Ada Jones" over "Ada was ..." gave "Ada". None
# of them a common surname ("Banks", "Burns", "Marks", "Gates" are left out).
_HEADLINE_VERBS = _words("""
resigns quits retires dies wins loses leaves joins returns steps speaks says warns urges denies
admits defends sues responds replies testifies apologises apologizes announces accepts declines
rejects vows pledges promises claims slams blasts praises criticises criticizes receives gets
takes makes exits departs arrives visits meets talks explains reveals launches unveils signs
agrees seeks faces fights beats tops leads heads marries weds welcomes celebrates recovers
survives writes sings performs named appointed elected arrested charged jailed cleared fired
sacked suspended freed ousted honoured honored injured killed hospitalised hospitalized
""")


def _opener_named(line: str, toks: list[_Token], openers: frozenset[str]) -> int:
    """How many of a headline's first tokens are a person's name alone, 0 for none: an honorific
    and capitalised words (``_name_alone``, no type's cue), one of which its chunk opens a
    sentence with alone and so reads as no name (``openers``: "Ada" of "Ada was ..."). Title
    case makes a headline's words a name alone as readily ("Mayor Tull Resigns" over "Tull said
    ..."); an honorific opens few, and two words at most (initials apart) follow it in a name: a
    headline under one goes on with what the person did ("Dr. Kim Lowe Resigns" over "Lowe said
    ..." named "Kim Lowe Resigns", "Prof. Ada Osk Wins Award" over "Osk said ..." "Ada Osk Wins
    Award"). So does one word after the word the text opens with, where it is a headline's verb
    (``_HEADLINE_VERBS``) and that word is no given name, but a surname under its honorific: the
    name ends before it ("Dr. Lowe Resigns" over "Lowe said ..." named "Lowe Resigns", is "Dr.
    Lowe"; "Dr. Mary Jones" over "Mary was ..." is her, and so is "Dr. Ada Jones" over "Ada was
    ...": any word in "-s" read as a verb took Jones, Williams, Evans, Davies, Ross ...)."""
    words = [t[_TEXT] for t in toks[1:] if len(t[_TEXT]) > 1]
    if len(toks) < 2 or toks[0][_TEXT].lower() not in _HONORIFICS or len(words) > 2 \
            or not any(t[_TEXT] in openers for t in toks) or not _name_alone(line, toks) or _cue_type(line) is not None:
        return 0
    if len(words) == 2 and words[0] in openers and words[0].lower() not in _FIRST_NAMES \
            and words[1].lower() in _HEADLINE_VERBS:
        return len(toks) - 1
    return len(toks)


def _headline_mentions(sentences: list[str], headlines: set[int], known: set[str]) -> list[_Mention]:
    """Mentions in title-case lines: only names the body also uses, longest first."""
    out = []
    names = sorted(known, key=lambda n: (-len(n), n))
    for i in sorted(headlines):
        line = sentences[i]
        taken: list[tuple[int, int]] = []
        for name in names:
            at = line.find(name)
            while at >= 0:
                end = at + len(name)
                free = not any(a < end and at < b for a, b in taken)
                bounded = (at == 0 or not line[at - 1].isalnum()) and \
                    (end == len(line) or not line[end].isalnum())
                if free and bounded:
                    taken.append((at, end))
                    out.append(_Mention(i, name))
                at = line.find(name, end)
    return out


# --- resolution and types ---

def _cue_words(word: str) -> list[str]:
    """The lower-case parts of a word that carry type cues ("Christmas-time" -> christmas, time)."""
    return [p for p in word.lower().replace(".", "").split("-") if p] or [word.lower()]


def _cue_type(name: str) -> str | None:
    words = [w for w in name.split() if not _YEAR.fullmatch(w)]
    if not words:
        return None
    lows = [p for w in words for p in _cue_words(w)]
    if (lows[-1] in _EVENT_WORDS and (len(lows) == 1 or lows[-1] not in _HOLIDAYS)) \
            or lows[0] == "christmas":
        return "event"
    if any(w in _ORG_WORDS for w in lows) or (len(lows) > 1 and lows[-1].endswith(_DE_ORG_ENDINGS)):
        return "organization"
    if lows[-1] in _GEO_SUFFIXES or (len(lows) > 1 and lows[0] in _GEO_PREFIXES):
        return "geo"
    if " ".join(lows) in _GEO_KNOWN or " ".join(lows) in _GEO_KNOWN_MULTI:
        return "geo"
    return None


def _inner_capitals(word: str) -> Iterator[tuple[str, str]]:
    """For each capital inside a word right after a lower-case letter, in lower case: the prefix
    of the part the capital is in ("mc" of "Smith-McKay" and "O'Brien-McKay") and the part it
    opens ("kay"; "ann" of "JoAnn"). What ``_camel`` and ``_glued_surname`` judge. A character
    upper case but no letter ("Ⓐ", a symbol) opens no part, and is no capital here."""
    for k in range(1, len(word)):
        if word[k].isupper() and word[k - 1].islower() and (part := _CAMEL_PART.match(word, k)):
            yield _PART_BREAK.split(word[:k])[-1].lower(), part.group().lower()


def _camel(word: str) -> bool:
    """Whether a word bears a capital inside it, right after a lower-case letter, as a firm's or
    a product's name does ("GitHub", "PayPal", "SpaceX"); a person's does so only after a
    surname's prefix ("McDonald", "MacArthur", "LeBron", "DeShawn", "VanDyke": _GLUED_PREFIXES)
    or before a given name ("JoAnn", "RuPaul"); a degree's never ("PhD", "PsyD": ``_DEGREES``)."""
    if word.rstrip(".,").lower() in _DEGREES:
        return False
    return any(prefix not in _GLUED_PREFIXES and given not in _FIRST_NAMES
               for prefix, given in _inner_capitals(word))


def _glued_surname(word: str) -> bool:
    """Whether every capital inside a word follows a prefix a surname glues ("AbuBakr",
    "DosSantos": ``_SURNAME_GLUES``, besides ``_camel``'s "McKay"), as no firm's does ("HealthTech")."""
    return all(prefix in _SURNAME_GLUES or prefix in _GLUED_PREFIXES or given in _FIRST_NAMES
               for prefix, given in _inner_capitals(word))


def _place_word(name: str) -> str | None:
    """Whether a lone word ends as a place's name does: "place" ("Bradford", "Portsmouth"),
    "surname" for the endings surnames share ("Cornhill", "Ashbury": ``_SURNAME_PLACE_ENDINGS``),
    else None. A weaker cue than ``_cue_type``'s: surnames end so too ("Ms. Belford", "Churchill"
    beside "Winston Churchill"), so a person's cue beats it (``_resolve``). The word's first part
    is read, as ``_cue_type`` reads its parts ("Stratford-upon-Avon"); a year beside it is none."""
    words = [w for w in name.split() if not _YEAR.fullmatch(w)]
    if len(words) != 1:
        return None
    first = _cue_words(words[0])[0]
    if len(first) <= 5:
        return None
    if first.endswith(_GEO_WORD_ENDINGS):
        return "place"
    return "surname" if first.endswith(_SURNAME_PLACE_ENDINGS) else None


def _initials(name: str) -> tuple[str, str]:
    words = [w for w in name.split() if not _YEAR.fullmatch(w)]
    caps = "".join(w[0] for w in words if w[0].isupper())
    every = "".join(w[0] for w in words).upper()
    return caps.upper(), every


def _resolve(mentions: list[_Mention], lower_words: set[str], *,
             german: bool = False) -> tuple[list[str], dict[str, str]]:
    """The canonical name in this chunk of every mention (of its surface name, unless the
    mention is typed apart from the name's others), and the canonical names' types.
    In German, a lone word needs a cue, a title or a longer name it shortens to be a name."""
    by_name: dict[str, list[_Mention]] = defaultdict(list)
    for m in mentions:
        by_name[m.name].append(m)
    cue = {name: _cue_type(name) for name in by_name}
    # A name with a word that bears a capital inside it ("GitHub", "PayPal", "YouTube Music",
    # "Azure OpenAI") is a firm's or a product's, unless a person's cue says otherwise ("JaVale
    # said") or it opens with a given name and each such word glues a surname's prefix ("Ann
    # AbuBakr", "Ann DosSantos"; not "Grace HealthTech", "Sam GitHub": a given name opens firms'
    # names too).
    cue.update((n, "organization") for n, ms in by_name.items()
               if cue[n] is None and any(map(_camel, n.split()))
               and not (" " in n and n.split()[0].lower() in _FIRST_NAMES
                        and all(_glued_surname(w) for w in n.split()[1:] if _camel(w)))
               and not any(m.honorific or m.title or m.speaks for m in ms))
    if german:      # a lone German noun is no body for being an English one ("Gas", "Post")
        cue.update((n, None) for n, c in cue.items()
                   if c in ("organization", "event") and " " not in n and n.lower() not in _DE_BODIES)
    # A place is not called by its generic word alone: "Hill" with no determiner and no place's
    # preposition before it, beside the one name ending in it ("Tom Hill ... Later Hill
    # returned") or with a person's cue ("Mr. Hill", "Hill said"), is a surname, and that name
    # the person's, though "-hill" ends places' names too (not "Notting Hill" beside "the Hill").
    # Only a word that is a surname too ("Hill", "Lane"; not "City": "Manchester City ... City
    # dominated"), and not where it qualifies a noun ("Capitol Hill ... Hill staffers left").
    generic = {n for n, ms in by_name.items() if cue[n] == "geo" and " " not in n and "-" not in n
               and _cue_words(n)[0] in _GEO_SURNAMES
               and not any(m.det or m.prep or m.locus or m.qualifies for m in ms)}
    if generic:
        ends: dict[str, list[str]] = defaultdict(list)
        for n, ms in by_name.items():
            head, _, last = n.rpartition(" ")
            if head and last in generic and cue[n] == "geo" and _cue_type(head) is None \
                    and _cue_words(head.split()[0])[0] not in _GEO_PREFIXES \
                    and not any(m.prep or m.locus for m in ms):
                ends[last].append(n)
        for n in generic:
            if len(ends[n]) == 1 or any(m.honorific or m.title or m.speaks for m in by_name[n]):
                cue[n] = None
                if len(ends[n]) == 1:
                    cue[ends[n][0]] = None
    # A name a place's generic word ends ("Jon Park", "Tom Hill"), no other cue making it a
    # place, is a person's when it speaks, smiles or goes ("Jon Park arrived", "Tom Hill said")
    # and its first word is a given name (``_FIRST_NAMES``) or stands alone in the chunk ("Jon
    # Park arrived. Jon said"), or an honorific stood before it ("Dr. Olusegun Park said"): a place goes and speaks for its office, trade or film ("Capitol
    # Hill said", "Jurassic Park came out", "Notting Hill went on to gross"). (A determiner or a
    # place's preposition keeps the place; a street's name goes and speaks for its trade or
    # office: "Wall Street came under pressure", "Downing Street said", and "Street" ends almost
    # no one's name.)
    for n, ms in by_name.items():
        head, _, last = n.rpartition(" ")
        given = head.split(" ", 1)[0]
        if head and cue[n] == "geo" and _cue_words(last)[0] in _GEO_SURNAMES - {"street"} \
                and _cue_type(head) is None \
                and _cue_words(given)[0] not in _GEO_PREFIXES \
                and (given.lower() in _FIRST_NAMES or _used_alone(given, by_name) or any(m.honorific for m in ms)) \
                and not any(m.det or m.prep or m.locus for m in ms) \
                and (any(m.speaks or m.goes for m in ms)
                     or " " not in head and given.lower() in _FIRST_NAMES and _cue_words(last)[0] in _GIVEN_SURNAMES):
            cue[n] = None
    # A place's generic word alone, no surname here, is the one name it ends, whatever that is:
    # "Capitol Hill ... Hill staffers left", "Manchester City ... City dominated", "Jon Park
    # ... Park officials left" (a stray place "Hill", "City", "Park" beside it before).
    ends_in: dict[str, list[str]] = defaultdict(list)
    for n in by_name:
        head, _, last = n.rpartition(" ")
        if head:
            ends_in[last].append(n)
    short_of = {n: ends_in[n][0] for n, ms in by_name.items()
                if cue[n] == "geo" and len(ends_in.get(n, ())) == 1 and " " not in n and "-" not in n
                and _cue_words(n)[0] in _GEO_SUFFIXES and not any(m.det or m.prep or m.locus for m in ms)}
    # A title kept in a name ("Mrs. Thornbury", "Captain Ashford") makes its last word a surname
    # in the chunk too, as an honorific does: "thanked Thornbury" is no place beside it.
    titled = {n.split()[-1] for n, ms in by_name.items() if " " in n and any(m.title for m in ms)}
    # Lone words ending as places do, and a place by it: "Bradford" as ever, "Cornhill" only
    # after a place's preposition in the chunk ("on Cornhill"), a person's cue beating both.
    placed = {name for name in by_name if cue[name] is None and name not in titled and (
        _place_word(name) == "place"
        or _place_word(name) == "surname" and any(m.locus or m.prep for m in by_name[name]))}

    def longer_type(name: str) -> str:
        ms = by_name[name]
        return cue[name] or ("geo" if 2 * sum(m.prep for m in ms) > len(ms) else "person")

    multi = [n for n in by_name if " " in n and not any(m.title for m in by_name[n])]
    by_last: dict[str, list[str]] = defaultdict(list)
    by_first: dict[str, list[str]] = defaultdict(list)
    by_initials: dict[str, list[str]] = defaultdict(list)
    yearless: dict[str, list[str]] = defaultdict(list)
    of_heads: dict[str, list[str]] = defaultdict(list)
    for n in by_name:
        if " of " in n:         # "Fishermen's Guild of Port Vell" is also "Fishermen's Guild"
            of_heads[n.split(" of ", 1)[0]].append(n)
    for n in multi:
        words = n.split()
        t = longer_type(n)
        core = [w for w in words if not _YEAR.fullmatch(w)]
        if len(core) < len(words):
            yearless[" ".join(core)].append(n)
        if t == "person" or (t == "geo" and core[0].lower() in _GEO_PREFIXES):
            by_last[core[-1]].append(n)
        if t in ("person", "organization") and core[0].lower() not in _GEO_PREFIXES:
            by_first[core[0]].append(n)
        for ini in set(_initials(n)):
            if len(ini) >= 2:
                by_initials[ini].append(n)
    # Any other lone word "in" or a going's "to" ... puts in the chunk is a place too ("moved to
    # Sausalito", "prayed in Hampstead. Hampstead was quiet"; "at", "on" take a body or anyone:
    # "editor at Ruvtane", "light on Scrooge"; so do "into", "near" and the "to" of "went",
    # "came", "back": "bumped into Ravi", "went to Priya"), unless it is the short form of a
    # longer name ("drove to Ann" beside "Ann Marsh", "moved to Stenquay" beside "Stenquay Media
    # Group": read as before) or a person's cue says otherwise (``types`` below).
    placed |= {name for name, ms in by_name.items() if cue[name] is None and " " not in name
               and name not in titled and _place_word(name) is None
               and any(m.prep and m.locus == "in" or m.locus == "way" for m in ms)
               and name not in by_last and name not in by_first}

    canon: dict[str, str] = {}
    for name, ms in by_name.items():
        target = name
        if name in short_of:
            target = short_of[name]
        elif " " not in name:
            if any(m.acronym for m in ms):
                cands = by_initials.get(name, [])
            elif any(m.honorific for m in ms):
                cands = [c for c in by_last.get(name, []) if longer_type(c) == "person"]
            else:
                cands = list(dict.fromkeys(by_last.get(name, []) + by_first.get(name, [])))
                # "based in Quinrellmouth" is the place, not "Quinrellmouth Port Authority".
                prep = any(m.prep for m in ms)
                own = cue[name] or ("geo" if prep or name in placed else None)
                if own is not None:
                    # A place's ending is no place after all in a person's surname ("Belford"
                    # beside "Zofia Belford"), unless "in" or the like says so.
                    # (one placed by an ending surnames share was placed by "in", "on" ... and
                    # is no surname: ``placed``; "at Crawford" is no more a place than before)
                    surname = name in placed and not prep and _place_word(name) == "place"
                    cands = [c for c in cands if longer_type(c) == own or
                             (surname and c in by_last.get(name, ()) and longer_type(c) == "person")]
                elif _place_word(name) is not None:
                    # No place here, so its ending says a surname: "Westbury" beside "Tom
                    # Westbury" is the man, though "Westbury Holdings" starts with it too.
                    surnames = [c for c in by_last.get(name, ()) if longer_type(c) == "person"]
                    cands = surnames if len(surnames) == 1 else cands
            if len(cands) == 1:
                target = cands[0]
        elif name in yearless and len(yearless[name]) == 1:
            target = yearless[name][0]
        elif len(of_heads.get(name, ())) == 1 and cue[name] in (None, cue[of_heads[name][0]]):
            target = of_heads[name][0]
        canon[name] = target

    # Typed per mention: a lone word placed by a place's preposition in some mentions only,
    # beside the one person whose surname it is, is the place there and that person elsewhere
    # ("They walked beyond Highgate ... Ann Highgate ... Highgate said no").
    def at_place(name: str, m: _Mention) -> bool:
        return m.prep or (m.locus and _place_word(name) == "surname")

    split: dict[str, str] = {}
    for name, ms in by_name.items():
        if " " not in name and canon[name] == name and any(at_place(name, m) for m in ms) \
                and not all(at_place(name, m) for m in ms):
            people = [c for c in by_last.get(name, ()) if longer_type(c) == "person"]
            if len(people) == 1:
                split[name] = people[0]
    targets = [split[m.name] if m.name in split and not at_place(m.name, m) else canon[m.name]
               for m in mentions]
    groups: dict[str, list[_Mention]] = defaultdict(list)
    for m, target in zip(mentions, targets):
        groups[target].append(m)
    types: dict[str, str] = {}
    for target, ms in groups.items():
        own = [m.measure for m in ms if m.name == target]
        if own and all(own) and not _eaten_person(target, ms):
            continue                    # "a piece of Cold Roast" (and "Boiled" for "Cold Boiled"): a dish
        personal = any(m.honorific or m.title for m in ms)
        t = cue[target] if target in cue else _cue_type(target)
        if t is None and target in placed and not personal and not any(m.speaks for m in ms):
            t = "geo"                   # "Cornhill"; "Mr. Crawford", "Crawford said" a person
        if t is None:
            if personal:
                t = "person"
            elif " " not in target and any(m.acronym for m in ms):
                t = "organization"
            elif " " not in target and all(m.locus == "at" for m in ms) and not any(m.speaks for m in ms):
                # (a lone word only ever after a job's or a working's "at" (``_at_a_body``), not
                # an arrival's: "docked at Sausalito", is a body's or a place's, rarely a person's:
                # "secretary at Port", "editor at Ruvtane", "met at Google"; not after any other
                # "at": "smiled at Fred", "a swipe at Johnson", nor "on": "settled on Hartley")
                t = "organization"
            elif 2 * sum(m.prep for m in ms) > len(ms) and not any(m.poss for m in ms):
                t = "geo"
            elif " " in target and _cue_words(target.split()[-1])[-1] in _BUILDING_HEADS \
                    and any(m.det or m.prep for m in ms):
                t = "geo"               # "the Mansion House", "at the Lantern Hall"; not "Stuart Hall"
            elif " " not in target and german and (len({m.sent for m in ms if not m.initial}) < 2
                                                   or any(m.det for m in ms)):
                continue                # German "Kaffee", "mit Kaffee": a name is used in two sentences
            elif " " not in target and len(ms) < _EPITHET_USES and not any(m.agent for m in ms) \
                    and _common_noun(target, ms, lower_words) and not _family(target, by_name):
                continue                # "a Glee", "the Parrot", "Hope" beside "hope": no entity
            elif " " in target and " of " not in target and all(m.the for m in ms) \
                    and (_sacred(target) or not any(m.speaks or m.agent == "lives" for m in ms)) \
                    and not _person_head(target, by_name):
                # (a head naming someone by role or kind is a person: "the Prime Minister", "the
                # Dalai Lama", "the Artful Dodger", and so is a role before a name: "the Virgin
                # Mary"; acting says nothing, as bodies and laws act too: "The Poll Tax was
                # hated", "the Red Cross delivered"; speaking does, and so does what only the
                # living do: "the White Rabbit ran", "the Cowardly Lion roared", unless the phrase
                # names the sacred: "The Holy Ghost blessed them", "the Holy Spirit said")
                t = "concept"           # "the Invisible World", "the Holy Spirit": no one's name
            else:
                t = "person"
        types[target] = t
    return targets, types


def _eaten_person(target: str, ms: list[_Mention]) -> bool:
    """Whether a full name eaten is someone all the same: its first word a given name ("The bear
    ate Timothy Treadwell") or its short form used in the chunk too ("Treadwell had filmed
    bears") not after a determiner, as a dish's is; not a dish ("ate Cold Roast ... the Roast
    was cold"), nor one after a measure's "of"."""
    return " " in target and any(m.measure == "eaten" for m in ms) \
        and (target.split(" ", 1)[0].lower() in _FIRST_NAMES or any(m.name != target and not m.det for m in ms))


def _used_alone(word: str, by_name: dict[str, list[_Mention]]) -> bool:
    """Whether the chunk uses ``word`` alone as a name, not after a determiner as a thing's
    short form is ("Ruvo Park arrived. Later Ruvo smiled."; not "Capitol Hill said ... the
    Capitol was closed", "the Virgin Birth ... the Birth")."""
    return any(not m.det for m in by_name.get(word, ()))


def _sacred(name: str) -> bool:
    """Whether a phrase names the sacred by its first word ("the Holy Ghost", "the Sacred Heart"):
    neither a being's verb nor speaking makes it a person ("The Holy Ghost blessed them", "The
    Holy Ghost said nothing"), its head may ("the Holy Father")."""
    return name.split(" ", 1)[0].lower() in ("holy", "sacred")


def _person_head(name: str, by_name: dict[str, list[_Mention]]) -> bool:
    """Whether a phrase's last word names someone by role or kind (``_PERSON_HEADS``), in the
    plural too ("the Wise Men", "the Three Kings"), or is an agent noun ("the Artful Dodger");
    or whether a role stands before one word in apposition, as a title does ("the Prophet
    Elijah": ``_ROLES_BEFORE_NAMES``), "Virgin" only before a given name or a word the chunk
    also uses alone ("the Virgin Mary"; not "the Virgin Birth", "the Virgin Islands")."""
    words = name.split()
    if len(words) == 2 and words[0].lower() in _ROLES_BEFORE_NAMES \
            and (words[0].lower() != "virgin" or words[1].lower() in _FIRST_NAMES or _used_alone(words[1], by_name)):
        return True             # (else its head still may name someone: "the Virgin Queen")
    low = _cue_words(name.rsplit(" ", 1)[-1])[-1]
    forms = (low, low[:-1]) if low.endswith("s") else (low,)
    return any(f in _PERSON_HEADS or (len(f) > 4 and f.endswith(_AGENT_ENDINGS)) for f in forms)


def _common_noun(word: str, ms: list[_Mention], lower_words: set[str]) -> bool:
    """Whether a lone capitalised word reads as a common noun in this chunk: written in lower
    case too (also as its plural or singular: "Spirits" beside "spirit"), or only ever after a
    determiner or a possessive ("the Parrot", "a Glee", "the Sultan's Groom")."""
    low = word.lower()
    forms = {low, low + "s", low + "es", low[:-1] if low.endswith("s") else low,
             low[:-2] if low.endswith("es") else low}
    return bool(forms & lower_words) or all(m.det for m in ms)


def _family(word: str, by_name: dict[str, list[_Mention]]) -> bool:
    """Whether ``word`` is a family by its surname ("the Cratchits" beside "Mrs. Cratchit")."""
    if len(word) < 3 or word[-1] != "s":
        return False
    stem = word[:-1]
    return any(n != word and n.split()[-1] in (stem, word) and
               (" " in n or any(m.honorific for m in ms)) for n, ms in by_name.items())


def _allowed_types(entity_types: list[str] | None) -> list[str]:
    if entity_types is None:
        return list(DEFAULT_TYPES)
    return [t.strip().lower() for t in entity_types if isinstance(t, str) and t.strip()]


def _emit_type(kind: str, allowed: list[str]) -> str:
    """The first allowed type that means ``kind``, else "concept"."""
    if kind in allowed:
        return kind
    synonyms = _TYPE_SYNONYMS.get(kind, frozenset())
    for t in allowed:
        if t in synonyms:
            return t
    return "concept"


# --- descriptions and relationships ---

def _trim(text: str) -> str:
    # Split no further than needed: a chunk without sentence ends is one long "sentence", which
    # every relationship of the chunk quotes (splitting it whole each time was most of the time).
    words = text.split(None, MAX_DESCRIPTION_WORDS)
    if len(words) <= MAX_DESCRIPTION_WORDS:
        return " ".join(words)
    return " ".join(words[:MAX_DESCRIPTION_WORDS]).rstrip(",;:") + " …"


def _relationships(per_sentence: dict[int, list[str]], sentences: list[str], blocks: list[int],
                   headlines: set[int], order: list[str]) -> list[RelationshipRecord]:
    rank = {name: i for i, name in enumerate(order)}
    same: dict[tuple[str, str], int] = defaultdict(int)
    near: dict[tuple[str, str], int] = defaultdict(int)
    where: dict[tuple[str, str], list[int]] = {}

    def key(a: str, b: str) -> tuple[str, str]:
        return (a, b) if rank[a] < rank[b] else (b, a)

    for s, names in per_sentence.items():
        for x in range(len(names)):
            for y in range(x + 1, min(len(names), x + 1 + _PAIR_WINDOW)):
                k = key(names[x], names[y])
                same[k] += 1
                where.setdefault(k, [s])
    for s, names in per_sentence.items():
        t = s + 1
        if t not in per_sentence or blocks[s] != blocks[t] or s in headlines:
            continue
        for a in names[:_NEAR_SIDE]:
            for b in per_sentence[t][:_NEAR_SIDE]:
                if a == b:
                    continue
                k = key(a, b)
                near[k] += 1
                if k not in where:
                    where[k] = [s, t]
    scored = []
    for k in set(same) | set(near):
        strength = min(10.0, max(1.0, 2.0 * same.get(k, 0) + 0.5 * near.get(k, 0)))
        scored.append((-strength, -same.get(k, 0), rank[k[0]], rank[k[1]], k, strength))
    scored.sort()
    degree: dict[str, int] = defaultdict(int)
    out = []
    for *_, (a, b), strength in scored:
        if degree[a] >= MAX_RELATIONSHIPS_PER_ENTITY or degree[b] >= MAX_RELATIONSHIPS_PER_ENTITY:
            continue
        degree[a] += 1
        degree[b] += 1
        desc = _trim(joined([sentences[s] for s in where[(a, b)]]))
        out.append(RelationshipRecord(source=a, target=b, description=desc, strength=strength))
    return out
